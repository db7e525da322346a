"""The triage list's order and folding over a real SQLite store (alertd/web/triage.py), and the signed link's
checks with an injected clock (alertd/core/signed_links.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from alertd.core import signed_links
from alertd.core.model import Change, Event, Incident, Signal
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore
from alertd.web import api, triage
from alertd.web.params import BadParam
from alertd.web.worst_first import worst_first

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
XID119 = Signal(kind="xid", severity="error", category="driver", xid=119, title="Xid 119: GSP RPC timeout")


def _incident(n: int, severity: str, status: str = "open", node: str = "", **kw: object) -> Incident:
    opened = NOW - timedelta(minutes=60 - n)
    inc = Incident(id=f"INC-{n}", key=f"node|n{n}", group="node", title=f"incident {n}", severity=severity,
                   category="driver", status=status, opened_at=opened, updated_at=opened, cluster="prod",
                   node=node or f"gpu-n{n}", primary=XID119, signals=["xid"], xids=[119], **kw)
    inc.timeline = [Event(at=opened, kind="opened", text=inc.title)]
    return inc


@pytest.fixture
async def store(tmp_path):
    s = SqliteStore(tmp_path / "alertd.sqlite3")
    await s.open()
    yield s
    await s.close()


async def _commit(store: SqliteStore, incidents: list[Incident]) -> None:
    await store.commit_step(Step(changes=[Change(incident=i, kinds=["opened"], events=i.timeline) for i in incidents],
                                 next_seq=max(int(i.id.split("-")[1]) for i in incidents) + 1))


async def test_a_node_incident_a_verdict_made_worse_than_its_fleet_is_listed_on_its_own(store):
    """A fleet of error node incidents, one of them raised to critical by a verdict; a resolved warning."""
    kids = [_incident(n, "critical" if n == 2 else "error", parent_id="INC-5") for n in (1, 2, 3)]
    fleet = _incident(5, "error", node="-", fleet=True, children=["INC-1", "INC-2", "INC-3"])
    fleet.node = ""
    fleet.nodes = ["gpu-n1", "gpu-n2", "gpu-n3"]
    await _commit(store, [*kids, _incident(4, "warning", status="resolved"), fleet])

    rows, nxt = await triage.triage_page(store, {"limit": "50"})
    assert [r.doc["id"] for r in rows] == ["INC-2", "INC-5", "INC-4"] and nxt is None
    folded = rows[1].fleet
    assert folded is not None and [c["id"] for c in folded.children] == ["INC-2", "INC-3", "INC-1"]  # worst first
    assert folded.by_status == [("open", 3)] and folded.by_severity == [("critical", 1), ("error", 2)]

    # A node search lists the node's own incident; a severity filter the fleet does not pass lists its nodes.
    rows, _ = await triage.triage_page(store, {"node": "gpu-n3"})
    assert "INC-3" in [r.doc["id"] for r in rows]
    rows, _ = await triage.triage_page(store, {"status": "open", "severity": "critical"})
    assert [r.doc["id"] for r in rows] == ["INC-2"]

    # One row a page: the same rows in the same order, and the cursor ends.
    seen, query = [], {"limit": "1"}
    while True:
        rows, nxt = await triage.triage_page(store, query)
        seen += [r.doc["id"] for r in rows]
        if nxt is None:
            break
        query = {"limit": "1", "cursor": nxt}
    assert seen == ["INC-2", "INC-5", "INC-4"]


async def test_a_fleets_node_incidents_are_read_once_a_render_not_range_by_range(store, monkeypatch):
    """A 100-node fleet listed first: its node incidents are left out of the range reads once it is known and
    read together for its row (one query), instead of a batch of range reads that skip them."""
    kids = [_incident(n, "error", parent_id="INC-200") for n in range(1, 101)]
    fleet = _incident(200, "error", fleet=True, children=[k.id for k in kids])
    await _commit(store, [*kids, _incident(150, "warning"), fleet])
    statements: list[tuple[str, int]] = []  # each query, and the rows it answered
    real = store.db.query

    def query(statement: str, args=()):
        rows = real(statement, args)
        statements.append((statement, len(rows)))
        return rows
    monkeypatch.setattr(store.db, "query", query)

    rows, nxt = await triage.triage_page(store, {"limit": "10"})
    assert [r.doc["id"] for r in rows] == ["INC-200", "INC-150"] and nxt is None
    fleet_row = rows[0].fleet
    assert fleet_row is not None and len(fleet_row.children) == 100 and fleet_row.by_status == [("open", 100)]
    ranged = sum(n for st, n in statements if st.startswith("SELECT seq, doc FROM incidents"))
    assert ranged <= 34, statements  # the fleet's first batch only (MIN_BATCH), then the fleet's nodes left out
    by_id = [n for st, n in statements if st.startswith("SELECT doc FROM incidents WHERE id IN")]
    assert len(by_id) == 1 and by_id[0] >= 100 - ranged, statements  # the rest in one read, for the fleet's row


async def test_a_cursor_it_did_not_hand_out_is_a_clear_error(store):
    for cursor in ("MTI", "OTkfMQ", "eHgfMQ"):  # one part; range 99; not a number
        with pytest.raises(BadParam) as err:
            await triage.triage_page(store, {"cursor": cursor})
        assert err.value.field == "cursor"


async def test_the_api_lists_in_the_triage_order_every_incident_and_newest_on_request(store):
    """GET /api/v1/incidents's page (alertd/web/api.py) in the web list's order, fleets' node incidents listed
    too; page by page the same; ``sort=newest`` the sequence alone."""
    kids = [_incident(n, "critical" if n == 2 else "error", parent_id="INC-5") for n in (1, 2, 3)]
    fleet = _incident(5, "error", node="-", fleet=True, children=["INC-1", "INC-2", "INC-3"])
    await _commit(store, [*kids, _incident(4, "warning", status="resolved"), fleet, _incident(6, "info")])

    docs, nxt = await api.incident_page(store, {})
    worst = ["INC-2", "INC-5", "INC-3", "INC-1", "INC-6", "INC-4"]
    assert [d["id"] for d in docs] == worst and nxt is None
    assert [d["id"] for d in worst_first(docs[::-1])] == worst  # the same order for documents already read
    rows, _ = await triage.triage_page(store, {})
    assert [r.doc["id"] for r in rows] == [i for i in worst if i in {"INC-2", "INC-5", "INC-6", "INC-4"}]

    for sort, expected in (("worst", worst), ("newest", ["INC-6", "INC-5", "INC-4", "INC-3", "INC-2", "INC-1"])):
        seen, query = [], {"limit": "2", "sort": sort}
        for _ in range(10):
            docs, nxt = await api.incident_page(store, query)
            seen += [d["id"] for d in docs]
            if nxt is None:
                break
            query = {"limit": "2", "sort": sort, "cursor": nxt}
        assert seen == expected, sort
    with pytest.raises(BadParam) as err:
        await api.incident_page(store, {"sort": "oldest"})
    assert err.value.field == "sort" and "newest" in err.value.message


def test_what_a_fleets_nodes_share_counts_each_node_once_per_value():
    kids = [{"id": f"INC-{n}", "status": "open", "severity": "error", "gpus": [{"model": "NVIDIA H100 80GB HBM3"}],
             "pod": "train-0", "namespace": "ml"} for n in range(4)]
    labels = {f"INC-{n}": [{"rack": "r7" if n < 3 else "r8", "modelName": "NVIDIA H100 80GB HBM3"}] * 2
              for n in range(4)}
    lines = [s.line for s in triage.shared_facts(kids, labels)]
    assert lines == ["rack r7 (3 of 4), r8 (1)", "namespace ml (all 4)", "GPU model NVIDIA H100 80GB HBM3 (all 4)"]


def test_a_signed_link_opens_its_incident_until_it_expires():
    key = "k" * 32
    query = signed_links.signed_query(key, "INC-7", NOW, timedelta(days=7))
    assert signed_links.refusal(key, "INC-7", query["exp"], query["sig"], NOW + timedelta(days=6, hours=23)) == ""
    assert "expired on 2026-12-08 12:00 UTC" in signed_links.refusal(key, "INC-7", query["exp"], query["sig"],
                                                                      NOW + timedelta(days=7))
    assert "does not match" in signed_links.refusal(key, "INC-8", query["exp"], query["sig"], NOW)
    assert "does not match" in signed_links.refusal("j" * 32, "INC-7", query["exp"], query["sig"], NOW)  # rotated
    assert "damaged" in signed_links.refusal(key, "INC-7", "-1", query["sig"], NOW)
    assert "not configured" in signed_links.refusal("", "INC-7", query["exp"], query["sig"], NOW)
