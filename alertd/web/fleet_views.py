"""What the GPU, node, fleet and RMA pages show, as plain data: shared by the JSON API and the HTML UI."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol, TypedDict

from alertd.core.json_types import JSONObject, JSONValue, as_array, as_object, text

from alertd.rules import rma
from alertd.core.model import ACKNOWLEDGED, CLOSED, OPEN
from alertd.store.reads import IncidentQuery


class FleetReads(Protocol):
    """The store's history reads (alertd/store/reads.py) these pages are made of: GPUs, nodes, incidents by
    query, rankings. Rows are the JSON-shaped dicts the API answers with."""

    async def query_incidents(self, q: IncidentQuery) -> list[tuple[int, JSONObject]]:
        """(sequence, incident document) newest first; the sequence pages."""

    async def find_gpus(self, ident: str) -> list[JSONObject]:
        """GPUs known by this UUID, serial or PCI id."""

    async def list_gpus(self, *, node: str = "", before: tuple[str, str] | None = None,
                        limit: int = 100) -> list[JSONObject]: ...

    async def gpu_history(self, uuid: str) -> list[JSONObject]: ...

    async def gpu_history_since(self, since: datetime) -> list[JSONObject]: ...

    async def gpus_by_uuid(self, uuids: list[str]) -> dict[str, JSONObject]: ...

    async def node_gpus(self, node: str) -> list[JSONObject]: ...

    async def ranking(self, since: datetime, limit: int = 20) -> dict[str, list[JSONObject]]: ...

    async def xid_heatmap(self, since: datetime) -> list[tuple[int, str, int]]: ...


def _seen(row: JSONObject) -> str:
    """When the GPU's alerts of this incident started (the incident's opening when unknown)."""
    return text(row, "first") or text(row, "openedAt")


def moves(history: list[JSONObject]) -> list[JSONObject]:
    """The nodes a GPU sat in, in order: a new stint starts whenever the node changes."""
    stints: list[tuple[str, str, str, str, int]] = []  # cluster, node, first, last, incidents
    for row in sorted(history, key=_seen):
        cluster, node = text(row, "cluster"), text(row, "node")
        last = text(row, "last") or text(row, "updatedAt")
        if not stints or stints[-1][:2] != (cluster, node):
            stints.append((cluster, node, _seen(row), last, 0))
        c, n, first, before, count = stints[-1]
        stints[-1] = (c, n, first, max(before, last), count + 1)
    return [{"cluster": c, "node": n, "first": first, "last": last, "incidents": count}
            for c, n, first, last, count in stints]


def gpu_state(gpu: JSONObject, history: list[JSONObject]) -> JSONObject:
    open_: list[JSONValue] = [r["incident"] for r in history if r.get("status") != CLOSED]
    return {"node": text(gpu, "node"), "cluster": text(gpu, "cluster"), "openIncidents": open_,
            "status": "failing" if open_ else "no open incident", "lastSeen": text(gpu, "last_seen")}


async def gpu_view(store: FleetReads, uuid: str) -> JSONObject | None:
    found = await store.gpus_by_uuid([uuid])
    if uuid not in found:
        return None
    gpu = found[uuid]
    history = await store.gpu_history(uuid)
    xids: list[JSONValue] = [{"at": _seen(r), "xid": x, "incident": r.get("incident"), "node": r.get("node")}
                             for r in sorted(history, key=_seen) for x in as_array(r.get("xids"))]
    return {"gpu": gpu, "state": gpu_state(gpu, history), "nodes": list[JSONValue](moves(history)),
            "incidents": list[JSONValue](list(reversed(history))), "xids": xids}


async def find_gpu_view(store: FleetReads, ident: str) -> tuple[JSONObject | None, list[JSONObject]]:
    """(the GPU page data, None when ``ident`` does not name exactly one GPU; the GPUs it names)."""
    view = await gpu_view(store, ident)
    if view is not None:
        return view, [as_object(view.get("gpu"))]
    found = await store.find_gpus(ident)
    return (await gpu_view(store, text(found[0], "uuid")) if len(found) == 1 else None), found


async def node_view(store: FleetReads, node: str, *, limit: int = 100, before: int | None = None) -> JSONObject:
    rows = await store.query_incidents(IncidentQuery(node=node, limit=limit + 1, before=before))
    page = rows[:limit]
    gpus = await store.node_gpus(node)
    known = await store.gpus_by_uuid([text(g, "uuid") for g in gpus])
    for g in gpus:
        info = known.get(text(g, "uuid"), {})
        g.update(serial=text(info, "serial"), pci_bus_id=text(info, "pci_bus_id"), model=text(info, "model"),
                 now_in=text(info, "node"))
    open_ = await store.query_incidents(IncidentQuery(node=node, status=OPEN.value, limit=50))
    acked = await store.query_incidents(IncidentQuery(node=node, status=ACKNOWLEDGED.value, limit=50))
    xids: dict[int, int] = {}
    for _, doc in page:
        for x in as_array(doc.get("xids")):
            if isinstance(x, int):
                xids[x] = xids.get(x, 0) + 1
    return {"node": node, "incidents": [doc for _, doc in page],
            "next": page[-1][0] if len(rows) > limit else None,
            "gpus": list[JSONValue](gpus), "open": [doc.get("id") for _, doc in open_ + acked],
            "xids": [[x, n] for x, n in sorted(xids.items())]}


class HeatRow(TypedDict):
    xid: int
    total: int
    cells: list[int]  # incidents per day


class Heatmap(TypedDict):
    dates: list[str]
    rows: list[HeatRow]
    peak: int


class FleetView(TypedDict):
    """The fleet page: the GPUs and nodes with the most incidents, and the Xids per day."""

    days: int
    since: datetime
    gpus: list[JSONObject]
    nodes: list[JSONObject]
    heatmap: Heatmap


async def fleet_view(store: FleetReads, now: datetime, days: int) -> FleetView:
    since = now - timedelta(days=days)
    ranking = await store.ranking(since)
    cells = await store.xid_heatmap(since)
    dates = [(since + timedelta(days=i + 1)).date().isoformat() for i in range(days)]
    grid: dict[int, dict[str, int]] = {}
    for xid, day, n in cells:
        grid.setdefault(xid, {})[day] = n
    peak = max((n for _, _, n in cells), default=0)
    rows = [HeatRow(xid=x, total=sum(grid[x].values()), cells=[grid[x].get(d, 0) for d in dates])
            for x in sorted(grid)]
    return FleetView(days=days, since=since, gpus=ranking["gpus"], nodes=ranking["nodes"],
                     heatmap=Heatmap(dates=dates, rows=rows, peak=peak))


async def rma_candidates(store: FleetReads, rules: tuple[rma.RmaRule, ...], now: datetime) -> list[rma.Candidate]:
    if not rules:
        return []
    history = await store.gpu_history_since(now - rma.longest_window(rules))
    gpus = await store.gpus_by_uuid(sorted({text(r, "uuid") for r in history}))
    return rma.evaluate(rules, history, gpus, now)
