"""Keep report facts in the store: every incident changed since the last rollup becomes a fact row.

Runs before retention prunes incidents (the housekeeping round) and before each report, so a report always
counts the latest state and still counts periods whose incidents are gone. Idempotent: the watermark is the
newest ``updated_at`` seen, and incidents updated at that instant are read again (an upsert, harmless).
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from alertd.core.json_types import JSONObject, as_array
from alertd.core.model import Incident, parse_iso
from alertd.report.compute import group_by_type
from alertd.report.facts import HARDWARE_CATEGORIES, fact, last_end
from alertd.report.shapes import Fact
from alertd.rules.windows import CordonPolicy, cordon_of, unplanned_severity
from alertd.store.reads import IncidentQuery
from alertd.core.vocabulary import SignalKind

PAGE = 500
MAX_PAGES = 400  # one rollup reads at most 200,000 incidents; the rest waits for the next


class RollupStore(Protocol):
    """The store as the rollup uses it (alertd/store/report_tables.py and reads.py): incidents changed since
    the watermark, the fleet's nodes, and the fact rows it writes."""

    async def report_watermark(self) -> str: ...

    async def fleet_nodes(self, cluster: str = "") -> list[tuple[str, str, str, int, bool]]:
        """(cluster, node, node type, GPUs, cordoned)."""

    async def query_incidents(self, q: IncidentQuery) -> list[tuple[int, JSONObject]]: ...

    async def get_incident(self, incident_id: str) -> Incident | None: ...

    async def upsert_report_facts(self, facts: Sequence[Mapping[str, object]], watermark: str) -> None: ...


async def _fact(store: RollupStore, doc: JSONObject, policy: CordonPolicy,
                nodes: Mapping[tuple[str, str], tuple[str, int]]) -> Fact:
    """The fact of one incident. Its members are read only when needed: a cordon (planned work is judged as
    routing judges it) or a resolved fault (when its last alert ended)."""
    cordoned = SignalKind.NODE_CORDONED in as_array(doc.get("signals"))
    ended_fault = doc.get("resolvedAt") and doc.get("category") in HARDWARE_CATEGORIES and not doc.get("parentId")
    inc = await store.get_incident(str(doc["id"])) if cordoned or ended_fault else None
    if inc is None:
        return fact(doc, nodes=nodes)
    cordon = cordon_of(inc) if cordoned else None
    planned = cordon is not None and unplanned_severity(inc, cordon, policy) is None
    return fact(doc, planned=planned, nodes=nodes, ended=last_end(inc))


async def rollup(store: RollupStore, policy: CordonPolicy | None = None) -> int:
    """Write the facts of incidents updated since the watermark; returns how many."""
    policy = policy or CordonPolicy()
    mark = await store.report_watermark()
    nodes = group_by_type(await store.fleet_nodes())
    newest, before, facts = mark, None, []
    for _ in range(MAX_PAGES):
        rows = await store.query_incidents(IncidentQuery(since=parse_iso(mark) if mark else None, before=before,
                                                         limit=PAGE))
        for _, doc in rows:
            facts.append(await _fact(store, doc, policy, nodes))
            newest = max(newest, str(doc.get("updatedAt") or ""))
        if len(rows) < PAGE:
            break
        before = rows[-1][0]
    await store.upsert_report_facts(facts, newest)
    return len(facts)


__all__ = ["RollupStore", "rollup"]
