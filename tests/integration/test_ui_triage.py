"""The incident list as a triage view, with an Xid 119 storm over 130 nodes and, beside it, the one critical
incident: a GPU's third Xid 79 in a week with its "replace GPU" verdict (testkit.triage_storm).

The worst comes first; the storm is one row that counts its node incidents, says what its nodes share and
lists the worst 20 on demand with "+110 more" leading to all of them, a hundred a page; every incident is on
exactly one page of the list or of its fleet.
"""
from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

from testkit import triage_storm as ts
from testkit.notify_harness import Harness

NODES = 130
ROW_ID = re.compile(r'<tr[^>]*>\s*<td data-label="Incident"><a href="[^"]+">([^<]+)</a>')
NEXT = re.compile(r'<a rel="next" href="([^"]+)"')


async def _page(h: Harness, path: str) -> tuple[str, list[str], str | None]:
    resp = await h.client.get(path)
    body = await resp.text()
    assert resp.status == 200, body[:500]
    nxt = NEXT.search(body)
    return body, ROW_ID.findall(body), html.unescape(nxt.group(1)) if nxt else None


async def test_the_worst_first_and_a_storm_folded_into_one_row(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        verdict = await ts.replace_gpu(h, now)
        fleet = await ts.storm(h, NODES, now - timedelta(minutes=3))  # newer than the verdict's incident
        children = set(fleet["children"])
        everything = {i["id"] for i in await h.incidents(limit="1000")}
        assert len(everything) == NODES + 4  # the storm's nodes, its fleet, the board's three incidents

        body, ids, _ = await _page(h, "/ui/incidents")
        assert ids[:2] == [verdict, fleet["id"]]  # critical before error, though the storm is newer
        assert not children & set(ids)  # the node incidents are in the fleet's row, not each a row
        row = body[body.index(f">{fleet['id']}</a>"):]
        row = row[:row.index("</tr>")]
        assert f"{NODES} node incidents: {NODES} open · {NODES} error" in row
        assert f"rack r0 ({NODES // 4 + 1} of {NODES}), r1 ({NODES // 4 + 1})" in row  # 33, 33, 32, 32 nodes
        assert f"namespace ml-train (all {NODES})" in row and "driver 550.54.15 (" in row
        shown = re.findall(r'<li><a href="/ui/incidents/(INC-\d+)">', row)
        assert len(shown) == 20 and set(shown) <= children
        assert f"+{NODES - 20} more: all {NODES} node incidents" in row
        assert "history: replace GPU" in body[body.index(f">{verdict}</a>"):body.index(f">{fleet['id']}</a>")]

        # The list a page at a time: every incident that is not folded into the fleet, once, the worst first.
        listed, path = [], "/ui/incidents?limit=2"
        while path:
            _, ids, path = await _page(h, path if path.startswith("/") else "/ui/incidents" + path)
            listed += ids
            assert len(listed) < 20, "the pages do not end"
        assert len(listed) == len(set(listed)) and set(listed) == everything - children
        docs = {i["id"]: i for i in await h.incidents(limit="1000")}
        assert [(docs[i]["status"], docs[i]["severity"]) for i in listed] == [
            ("open", "critical"), ("open", "error"), ("resolved", "critical"), ("resolved", "critical")]

        # The fleet's node incidents, a hundred a page: each of them once.
        seen, path = [], f"/ui/incidents/{fleet['id']}/nodes"
        while path:
            _, ids, path = await _page(h, path if path.startswith("/") else f"/ui/incidents/{fleet['id']}/nodes" + path)
            seen += ids
            assert len(seen) <= NODES
        assert sorted(seen) == sorted(children)

        # A node search lists the node's own incident.
        node = docs[fleet["children"][0]]["node"]
        _, ids, _ = await _page(h, f"/ui/incidents?node={node}")
        assert fleet["children"][0] in ids
    finally:
        await h.stop()
