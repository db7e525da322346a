"""What the GPU, node, fleet and RMA pages show, as plain data: shared by the JSON API and the HTML UI."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from alertd.rules import rma
from alertd.core.model import CLOSED
from alertd.store.reads import IncidentQuery


class FleetReads(Protocol):
    """The store's history reads (alertd/store/reads.py) these pages are made of: GPUs, nodes, incidents by
    query, rankings. Rows are the JSON-shaped dicts the API answers with."""

    async def query_incidents(self, q: IncidentQuery) -> list[tuple[int, dict[str, Any]]]:
        """(sequence, incident document) newest first; the sequence pages."""

    async def find_gpus(self, ident: str) -> list[dict[str, Any]]:
        """GPUs known by this UUID, serial or PCI id."""

    async def list_gpus(self, *, node: str = "", before: tuple[str, str] | None = None,
                        limit: int = 100) -> list[dict[str, Any]]: ...

    async def gpu_history(self, uuid: str) -> list[dict[str, Any]]: ...

    async def gpu_history_since(self, since: datetime) -> list[dict[str, Any]]: ...

    async def gpus_by_uuid(self, uuids: list[str]) -> dict[str, dict[str, Any]]: ...

    async def node_gpus(self, node: str) -> list[dict[str, Any]]: ...

    async def ranking(self, since: datetime, limit: int = 20) -> dict[str, list[dict[str, Any]]]: ...

    async def xid_heatmap(self, since: datetime) -> list[tuple[int, str, int]]: ...


def _seen(row: dict[str, Any]) -> str:
    """When the GPU's alerts of this incident started (the incident's opening when unknown)."""
    return str(row.get("first") or row["openedAt"])


def moves(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes a GPU sat in, in order: a new stint starts whenever the node changes."""
    stints: list[dict[str, Any]] = []
    for row in sorted(history, key=_seen):
        where = (row["cluster"], row["node"])
        if not stints or (stints[-1]["cluster"], stints[-1]["node"]) != where:
            stints.append({"cluster": row["cluster"], "node": row["node"], "first": _seen(row),
                           "last": row.get("last") or row["updatedAt"], "incidents": 0})
        stints[-1]["last"] = max(stints[-1]["last"], row.get("last") or row["updatedAt"])
        stints[-1]["incidents"] += 1
    return stints


def gpu_state(gpu: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    open_ = [r["incident"] for r in history if r["status"] != CLOSED]
    return {"node": gpu.get("node", ""), "cluster": gpu.get("cluster", ""), "openIncidents": open_,
            "status": "failing" if open_ else "no open incident", "lastSeen": gpu.get("last_seen", "")}


async def gpu_view(store: FleetReads, uuid: str) -> dict[str, Any] | None:
    found = await store.gpus_by_uuid([uuid])
    if uuid not in found:
        return None
    gpu = found[uuid]
    history = await store.gpu_history(uuid)
    xids = [{"at": _seen(r), "xid": x, "incident": r["incident"], "node": r["node"]}
            for r in sorted(history, key=_seen) for x in r.get("xids", [])]
    return {"gpu": gpu, "state": gpu_state(gpu, history), "nodes": moves(history),
            "incidents": list(reversed(history)), "xids": xids}


async def find_gpu_view(store: FleetReads, ident: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the GPU page data, None when ``ident`` does not name exactly one GPU; the GPUs it names)."""
    view = await gpu_view(store, ident)
    if view is not None:
        return view, [view["gpu"]]
    found = await store.find_gpus(ident)
    return (await gpu_view(store, found[0]["uuid"]) if len(found) == 1 else None), found


async def node_view(store: FleetReads, node: str, *, limit: int = 100, before: int | None = None) -> dict[str, Any]:
    rows = await store.query_incidents(IncidentQuery(node=node, limit=limit + 1, before=before))
    page = rows[:limit]
    gpus = await store.node_gpus(node)
    known = await store.gpus_by_uuid([g["uuid"] for g in gpus])
    for g in gpus:
        info = known.get(g["uuid"], {})
        g.update(serial=info.get("serial", ""), pci_bus_id=info.get("pci_bus_id", ""), model=info.get("model", ""),
                 now_in=info.get("node", ""))
    open_ = await store.query_incidents(IncidentQuery(node=node, status="open", limit=50))
    acked = await store.query_incidents(IncidentQuery(node=node, status="acknowledged", limit=50))
    xids: dict[int, int] = {}
    for _, doc in page:
        for x in doc.get("xids", []):
            xids[x] = xids.get(x, 0) + 1
    return {"node": node, "incidents": [doc for _, doc in page],
            "next": page[-1][0] if len(rows) > limit else None,
            "gpus": gpus, "open": [doc["id"] for _, doc in open_ + acked],
            "xids": sorted(xids.items())}


async def fleet_view(store: FleetReads, now: datetime, days: int) -> dict[str, Any]:
    since = now - timedelta(days=days)
    ranking = await store.ranking(since)
    cells = await store.xid_heatmap(since)
    dates = [(since + timedelta(days=i + 1)).date().isoformat() for i in range(days)]
    grid: dict[int, dict[str, int]] = {}
    for xid, day, n in cells:
        grid.setdefault(xid, {})[day] = n
    peak = max((n for _, _, n in cells), default=0)
    rows = [{"xid": x, "total": sum(grid[x].values()), "cells": [grid[x].get(d, 0) for d in dates]}
            for x in sorted(grid)]
    return {"days": days, "since": since, "gpus": ranking["gpus"], "nodes": ranking["nodes"],
            "heatmap": {"dates": dates, "rows": rows, "peak": peak}}


async def rma_candidates(store: FleetReads, rules: tuple[rma.RmaRule, ...], now: datetime) -> list[rma.Candidate]:
    if not rules:
        return []
    history = await store.gpu_history_since(now - rma.longest_window(rules))
    gpus = await store.gpus_by_uuid(sorted({r["uuid"] for r in history}))
    return rma.evaluate(rules, history, gpus, now)
