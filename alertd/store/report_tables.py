"""What the reliability report reads, kept apart from the incidents so it outlives their pruning.

* ``fleet_nodes``: the GPU nodes as last sampled from the Kubernetes API (type, GPUs, cordoned);
* ``fleet_daily``: per day, cluster and node type, the nodes, GPUs and cordoned nodes of that day's
  latest sample: the denominator of GPU-days and the cordoned series;
* ``report_facts``: one small row per incident (alertd/report/facts.py says what), written by the
  report's rollup before retention prunes the incident: a pruned period still reports exactly;
* ``report_digests``: the weekly digest's claim, so one process of one replica posts it, once.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from alertd.core.fleet import NodeSample
from alertd.core.json_types import JSONObject, obj
from alertd.core.model import iso
from alertd.store.database import Part

MIGRATION = [
    """CREATE TABLE fleet_nodes (
        cluster TEXT NOT NULL,
        node TEXT NOT NULL,
        node_type TEXT NOT NULL,
        gpus INTEGER NOT NULL,
        cordoned INTEGER NOT NULL,
        sampled_at TEXT NOT NULL,
        PRIMARY KEY (cluster, node))""",
    """CREATE TABLE fleet_daily (
        day TEXT NOT NULL,
        cluster TEXT NOT NULL,
        node_type TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        gpus INTEGER NOT NULL,
        cordoned_nodes INTEGER NOT NULL,
        cordoned_gpus INTEGER NOT NULL,
        sampled_at TEXT NOT NULL,
        PRIMARY KEY (day, cluster, node_type))""",
    """CREATE TABLE report_facts (
        incident_id TEXT PRIMARY KEY,
        cluster TEXT NOT NULL,
        node TEXT NOT NULL,
        node_type TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        resolved_at TEXT,
        kind TEXT NOT NULL,
        doc TEXT NOT NULL)""",
    "CREATE INDEX report_facts_opened ON report_facts (opened_at)",
    """CREATE TABLE report_digests (
        period TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        claimed_at TEXT NOT NULL,
        done_at TEXT)""",
]

UPSERT_NODE = """INSERT INTO fleet_nodes (cluster, node, node_type, gpus, cordoned, sampled_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (cluster, node) DO UPDATE SET node_type = excluded.node_type, gpus = excluded.gpus,
  cordoned = excluded.cordoned, sampled_at = excluded.sampled_at"""
UPSERT_DAILY = """INSERT INTO fleet_daily (day, cluster, node_type, nodes, gpus, cordoned_nodes, cordoned_gpus, sampled_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (day, cluster, node_type) DO UPDATE SET nodes = excluded.nodes, gpus = excluded.gpus,
  cordoned_nodes = excluded.cordoned_nodes, cordoned_gpus = excluded.cordoned_gpus, sampled_at = excluded.sampled_at"""
UPSERT_FACT = """INSERT INTO report_facts (incident_id, cluster, node, node_type, opened_at, resolved_at, kind, doc)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (incident_id) DO UPDATE SET node = excluded.node, node_type = excluded.node_type,
  resolved_at = excluded.resolved_at, kind = excluded.kind, doc = excluded.doc"""
# A claim nobody finished within the stale time (its holder died) may be taken again.
CLAIM_DIGEST = """INSERT INTO report_digests (period, holder, claimed_at) VALUES (?, ?, ?)
ON CONFLICT (period) DO UPDATE SET holder = excluded.holder, claimed_at = excluded.claimed_at
WHERE report_digests.done_at IS NULL AND report_digests.claimed_at < ? RETURNING period"""


def daily_rows(day: str, cluster: str, nodes: Iterable[NodeSample], at: str) -> list[tuple[Any, ...]]:
    """fleet_daily rows of one sample: per node type, nodes, GPUs, cordoned nodes and their GPUs."""
    per: dict[str, list[int]] = {}
    for n in nodes:
        row = per.setdefault(n.node_type, [0, 0, 0, 0])
        row[0] += 1
        row[1] += n.gpus
        row[2] += int(n.cordoned)
        row[3] += n.gpus if n.cordoned else 0
    return [(day, cluster, t, *v, at) for t, v in sorted(per.items())]


class ReportTables(Part):
    """The reliability report's tables (a part of the store)."""

    async def record_fleet_sample(self, cluster: str, nodes: list[NodeSample], now: datetime) -> None:
        """The cluster's GPU nodes now: replaces its fleet_nodes, and sets today's fleet_daily rows."""
        at = iso(now) or ""
        day = at[:10]

        def do(cur: Any) -> None:
            cur.execute(self.db.q("DELETE FROM fleet_nodes WHERE cluster = ?"), (cluster,))
            cur.executemany(self.db.q(UPSERT_NODE), [(cluster, n.node, n.node_type, n.gpus, int(n.cordoned), at)
                                                   for n in nodes])
            cur.execute(self.db.q("DELETE FROM fleet_daily WHERE day = ? AND cluster = ?"), (day, cluster))
            cur.executemany(self.db.q(UPSERT_DAILY), daily_rows(day, cluster, nodes, at))
        await self.db.run(self.db.tx, do)

    async def fleet_days(self, until_day: str, cluster: str = "") -> list[tuple[str, str, str, int, int, int, int]]:
        """(day, cluster, node_type, nodes, gpus, cordoned_nodes, cordoned_gpus) up to ``until_day``, oldest first."""
        where, args = "day <= ?", [until_day]
        if cluster:
            where, args = where + " AND cluster = ?", args + [cluster]
        rows = await self.db.run(self.db.query, "SELECT day, cluster, node_type, nodes, gpus, cordoned_nodes, cordoned_gpus "
                               f"FROM fleet_daily WHERE {where} ORDER BY day, cluster, node_type", args)
        return [tuple(r) for r in rows]

    async def fleet_nodes(self, cluster: str = "") -> list[tuple[str, str, str, int, bool]]:
        """(cluster, node, node_type, gpus, cordoned) as last sampled."""
        rows = await self.db.run(self.db.query, "SELECT cluster, node, node_type, gpus, cordoned FROM fleet_nodes"
                               + (" WHERE cluster = ?" if cluster else "") + " ORDER BY cluster, node",
                               [cluster] if cluster else [])
        return [(r[0], r[1], r[2], int(r[3]), bool(r[4])) for r in rows]

    async def upsert_report_facts(self, facts: Sequence[Mapping[str, object]], watermark: str) -> None:
        """Facts of incidents (``id, cluster, node, nodeType, openedAt, resolvedAt, kind`` + the rest in doc) and
        the rollup's new watermark, in one transaction."""
        rows = [(f["id"], f["cluster"], f["node"], f["nodeType"], f["openedAt"], f["resolvedAt"], f["kind"],
                 json.dumps(f, separators=(",", ":"))) for f in facts]

        def do(cur: Any) -> None:
            if rows:
                cur.executemany(self.db.q(UPSERT_FACT), rows)
            cur.execute(self.db.q("INSERT INTO meta (key, value) VALUES ('report_rollup', ?) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), (watermark,))
        await self.db.run(self.db.tx, do)

    async def report_watermark(self) -> str:
        rows = await self.db.run(self.db.query, "SELECT value FROM meta WHERE key = 'report_rollup'")
        return str(rows[0][0]) if rows else ""

    async def report_facts(self, since: datetime, until: datetime, cluster: str = "") -> list[JSONObject]:
        """Facts of the incidents that overlap [since, until): opened before until, not resolved before since."""
        where = ["opened_at < ?", "(resolved_at IS NULL OR resolved_at >= ?)"]
        args: list[Any] = [iso(until), iso(since)]
        if cluster:
            where.append("cluster = ?")
            args.append(cluster)
        rows = await self.db.run(self.db.query, "SELECT doc FROM report_facts WHERE " + " AND ".join(where)
                               + " ORDER BY opened_at, incident_id", args)
        return [obj(json.loads(r[0]), "a report fact") for r in rows]

    async def claim_digest(self, period: str, holder: str, now: datetime, stale_before: datetime) -> bool:
        """True for the one caller that may post this period's digest (until it is marked done, a claim older
        than ``stale_before`` may be taken over: its holder died before posting)."""
        def do(cur: Any) -> bool:
            cur.execute(self.db.q(CLAIM_DIGEST), (period, holder, iso(now), iso(stale_before)))
            return bool(cur.fetchall())
        claimed: bool = await self.db.run(self.db.tx, do)
        return claimed

    async def finish_digest(self, period: str, now: datetime) -> None:
        def do(cur: Any) -> None:
            cur.execute(self.db.q("UPDATE report_digests SET done_at = ? WHERE period = ?"), (iso(now), period))
        await self.db.run(self.db.tx, do)


__all__ = ["MIGRATION", "NodeSample", "ReportTables", "daily_rows"]
