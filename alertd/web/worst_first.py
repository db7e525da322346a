"""The order of every incident list (the API's, the CLI's, the web UI's): the worst first.

Open, then acknowledged, then resolved; within each, critical down to info; within each, the newest first. A
history verdict that raised an incident's severity (alertd/engine/judge.py) raised its stored severity, so it
counts. Each (status, severity) pair is one keyset range read newest first (the store's ``incidents_triage``
index): page N costs what page 1 costs, and the cursor names the pair and the last sequence.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Awaitable, Callable, Mapping, Protocol

from alertd.core.json_types import JSONObject, text
from alertd.core.model import INCIDENT_STATES, SEVERITIES
from alertd.store.reads import IncidentQuery
from alertd.web.params import BadParam, decode_cursor, encode_cursor

# open, acknowledged, resolved; critical .. info
BUCKETS: tuple[tuple[str, str], ...] = tuple((s, v) for s in INCIDENT_STATES for v in reversed(SEVERITIES))
BUCKET_OF: dict[tuple[object, object], int] = {pair: i for i, pair in enumerate(BUCKETS)}
MIN_BATCH = 32  # rows read at a time from one range at least (rows folded into another's are skipped)

Rows = list[tuple[int, JSONObject]]  # (sequence, incident document), as the store answers
# Given rows read from a range: the ids shown inside another row (a fleet's), and so not on their own: these
# rows' and any not read yet, which the range and the ones after it then leave out of their reads
Fold = Callable[[Rows, int], Awaitable[set[str]]]


class OrderedReads(Protocol):
    async def query_incidents(self, q: IncidentQuery) -> Rows: ...


def rank(doc: JSONObject) -> int:
    return BUCKET_OF.get((doc.get("status"), doc.get("severity")), len(BUCKETS))


def worst_first(docs: list[JSONObject]) -> list[JSONObject]:
    """Incident documents already read, in the lists' order."""
    return sorted(docs, key=lambda d: (rank(d), -_number(d)))


def _number(doc: JSONObject) -> int:
    """INC-42 -> 42: the order incidents were opened in (ids are handed out in sequence)."""
    digits = text(doc, "id").rpartition("-")[2]
    return int(digits) if digits.isdigit() else 0


def cursor_of(query: Mapping[str, str]) -> tuple[int, int | None]:
    """(first range, last sequence read in it) from ``?cursor=``; (0, None) without one."""
    parts = decode_cursor(query, 2)
    if parts is None:
        return 0, None
    bucket, seq = parts
    if not (bucket.isdigit() and int(bucket) < len(BUCKETS) and seq.isdigit() and int(seq) < 2 ** 63):
        raise BadParam("cursor", "cursor is not one this server handed out (use the link to the next page)")
    return int(bucket), int(seq)


async def worst_first_page(store: OrderedReads, q: IncidentQuery, cursor: tuple[int, int | None],
                           fold: Fold | None = None) -> tuple[Rows, str | None]:
    """One page of ``q`` (its filters and limit) the worst first, from ``cursor`` (:func:`cursor_of`); the rows
    and the next page's cursor. ``fold`` names rows shown inside others: they are left out and not counted,
    and those it names before they are read are not read at all."""
    start, before = cursor
    found: list[tuple[int, int, JSONObject]] = []
    inside: set[str] = set()
    for bucket in range(start, len(BUCKETS)):
        status, severity = BUCKETS[bucket]
        if (q.status and q.status != status) or (q.severity and q.severity != severity):
            continue
        after = before if bucket == start else None
        while len(found) <= q.limit:
            batch = max(q.limit + 1 - len(found), MIN_BATCH)
            rows = await store.query_incidents(replace(q, status=status, severity=severity, before=after, limit=batch,
                                                       leave_out=frozenset(inside)))
            inside |= await fold(rows, bucket) if fold is not None else set()
            found += [(bucket, seq, doc) for seq, doc in rows if text(doc, "id") not in inside]
            if len(rows) < batch:
                break
            after = rows[-1][0]
        if len(found) > q.limit:
            break
    page = found[:q.limit]
    nxt = encode_cursor(page[-1][0], page[-1][1]) if len(found) > q.limit else None
    return [(seq, doc) for _, seq, doc in page], nxt


__all__ = ["BUCKETS", "Fold", "OrderedReads", "cursor_of", "rank", "worst_first", "worst_first_page"]
