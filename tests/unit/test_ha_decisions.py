"""Pure HA decisions: the engine lease and reconciliation with Alertmanager."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

from alertd.engine.pipeline import Engine
from alertd.ha.elector import Elector
from alertd.store.lease import LeaseVerdict, LeaseRow, judge_lease
from alertd.alertmanager.reconcile import Answer, answer_from, as_webhook, group_filter, held_firing, resolutions, stale
from alertd.core.model import RECONCILED_BY
from alertd.receive.payload import parse_notification
from alertd.rules.ruleset import load_rules
from alertd.rules.shipped import SHIPPED_RULES

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_lease_decisions():
    assert judge_lease(None, "a", 0, 100.0, 6).action == "create"
    held = LeaseRow("a", 4, 105.0)
    assert (judge_lease(held, "a", 4, 101.0, 6).action, judge_lease(held, "a", 4, 101.0, 6).expires_at) == ("renew", 107.0)
    assert judge_lease(held, "b", 0, 104.9, 6).action == "wait"  # not expired: the holder keeps it
    taken = judge_lease(held, "b", 0, 105.0, 6)
    assert (taken.action, taken.token) == ("take", 5)  # expired: the token grows, fencing the old holder
    assert judge_lease(held, "a", 3, 101.0, 6).action == "wait"  # same name, stale token: not a renewal
    assert judge_lease(LeaseRow("a", 4, 0.0), "a", 0, 1.0, 6).action == "take"  # a released lease


def engine_with(alerts_doc: dict) -> Engine:
    engine = Engine(load_rules([str(SHIPPED_RULES)]))
    engine.ingest(parse_notification(alerts_doc, T0).alerts, T0)
    return engine


def webhook(*fps: str) -> dict:
    alerts = [{"status": "firing", "labels": {"alertname": "GPUXidError", "node": f"n{i}", "cluster": "c", "xid": "79",
                                              "gpu": "0"},
               "annotations": {}, "startsAt": "2026-11-30T23:59:00Z", "endsAt": "0001-01-01T00:00:00Z",
               "fingerprint": fp} for i, fp in enumerate(fps)]
    return {"version": "4", "status": "firing", "receiver": "alertd", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "", "groupKey": "", "alerts": alerts}


def test_only_alerts_no_alertmanager_holds_are_resolved():
    engine = engine_with(webhook("aa01", "aa02", "aa03"))
    held = held_firing(engine.state.incidents.values())
    assert sorted(h.fingerprint for h in held) == ["aa01", "aa02", "aa03"]
    one, two = Answer(frozenset({"aa01"}), T0 - timedelta(hours=1)), Answer(frozenset({"aa02"}), T0 - timedelta(hours=1))
    gone = stale(held, [one, two], T0, timedelta(minutes=3))
    assert [h.fingerprint for h in gone] == ["aa03"]  # HA peers: held by either one is enough


def test_no_decision_when_an_alertmanager_is_silent_or_just_started():
    held = held_firing(engine_with(webhook("aa01")).state.incidents.values())
    settled = Answer(frozenset(), T0 - timedelta(hours=1))
    assert stale(held, [settled, None], T0, timedelta(minutes=3)) == []
    assert stale(held, [settled, Answer(frozenset(), T0 - timedelta(seconds=30))], T0, timedelta(minutes=3)) == []
    assert stale(held, [], T0, timedelta(minutes=3)) == []
    assert len(stale(held, [settled], T0, timedelta(minutes=3))) == 1


def test_resolutions_close_the_member_and_say_so_in_the_timeline():
    engine = engine_with(webhook("aa01"))
    gone = stale(held_firing(engine.state.incidents.values()), [Answer(frozenset())], T0, timedelta(0))
    alerts = resolutions(gone, T0 + timedelta(minutes=5))
    assert alerts[0].receiver == RECONCILED_BY and alerts[0].starts_at == gone[0].starts_at
    changes = engine.ingest(alerts, T0 + timedelta(minutes=5))
    texts = [e.text for c in changes for e in c.events if e.kind == "alert_resolved"]
    assert texts == ["resolved: Alertmanager no longer holds its alerts (GPUXidError)"], texts
    changes = engine.tick(T0 + timedelta(hours=1))
    assert [c.incident.status for c in changes] == ["resolved"]


def test_an_incident_reconciled_away_gets_one_line_naming_its_alerts():
    from testkit.builders import alert, engine as shipped_engine, xid

    eng = shipped_engine()
    eng.ingest([xid(79, gpu="0"), xid(79, gpu="1"), alert("DCGMExporterDown", node="gpu-node-1", severity="critical")], T0)
    gone = stale(held_firing(eng.state.incidents.values()), [Answer(frozenset())], T0, timedelta(0))
    changes = eng.ingest(resolutions(gone, T0 + timedelta(minutes=5)), T0 + timedelta(minutes=5))
    lines = [e.text for c in changes for e in c.events if e.kind == "alert_resolved"]
    assert len(gone) == 3 and lines == [
        "resolved: Alertmanager no longer holds its alerts (GPUXidError, DCGMExporterDown)"], lines
    assert [c.incident.firing for c in changes] == [0] and len(changes[0].members) == 3


def test_alertmanager_answers_and_truncated_groups():
    answer = answer_from([{"fingerprint": "AB12", "status": {"state": "active"}}],
                         {"uptime": "2026-11-30T20:00:00.000Z"})
    assert answer.fingerprints == {"ab12"} and answer.started_at == datetime(2026, 11, 30, 20, tzinfo=timezone.utc)
    assert group_filter({"node": 'n"1', "alertname": "X"}) == [("filter", 'alertname="X"'), ("filter", 'node="n\\"1"')]
    api = [{"labels": {"alertname": "GPUXidError", "node": "n1"}, "annotations": {}, "fingerprint": "ab12",
            "startsAt": "2026-11-30T23:00:00.000Z", "endsAt": "2026-12-01T00:05:00.000Z", "status": {"state": "active"},
            "generatorURL": "http://prom/graph", "receivers": [{"name": "alertd"}], "updatedAt": "2026-12-01T00:00:00Z"},
           {"labels": {"alertname": "Other"}, "annotations": {}, "fingerprint": "cd34", "startsAt": "2026-11-30T23:00:00Z",
            "endsAt": "2026-12-01T00:05:00Z", "status": {"state": "suppressed"}}]
    note = parse_notification(as_webhook(api, "alertd"), T0)
    assert [(a.fingerprint, a.status, a.ends_at) for a in note.alerts] == [("ab12", "firing", None)]


def test_installation_scopes_what_leaves_alertd():
    from alertd.core.installation import scoped, unscoped

    assert scoped("a1b2c3d4", "INC-7") == "a1b2c3d4:INC-7" and scoped("", "INC-7") == "INC-7"
    assert unscoped("a1b2c3d4:INC-7", "a1b2c3d4") == "INC-7"
    assert unscoped("INC-7", "a1b2c3d4") == "INC-7"  # a button posted before installation ids
    assert unscoped("ffff0000:INC-7", "a1b2c3d4") is None  # another installation's button


class HangingLeaseStore:
    """A lease store whose calls stop answering once ``cut`` is set, like a database behind a partition."""

    def __init__(self) -> None:
        self.cut = asyncio.Event()
        self.calls = 0

    async def acquire_lease(self, holder: str, address: str, ttl: float, token: int) -> tuple[LeaseVerdict, LeaseRow | None]:
        self.calls += 1
        if self.cut.is_set():
            await asyncio.Event().wait()  # never answers
        return LeaseVerdict("renew" if token else "create", token or 1, 0.0), None


async def test_a_cut_off_leader_steps_down_at_half_the_ttl_even_if_the_store_never_answers():
    store, events = HangingLeaseStore(), []

    async def elected(token: int) -> None:
        events.append(("elected", token))

    async def deposed(why: str) -> None:
        events.append(("deposed", why))

    elector = Elector(store, holder="a", address="", ttl=0.6, renew_every=0.1, on_elected=elected, on_deposed=deposed)
    await elector.round()
    assert elector.leading and events == [("elected", 1)]
    store.cut.set()
    cut_at = time.monotonic()
    runner = asyncio.create_task(elector.run())
    try:
        for _ in range(100):  # bounded: 2 s at most
            if not elector.leading:
                break
            await asyncio.sleep(0.02)
        took = time.monotonic() - cut_at
    finally:
        await elector.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    assert not elector.leading and events[-1][0] == "deposed" and "no answer in time" in events[-1][1]
    assert 0.2 <= took <= 0.3 + 0.15, took  # ttl / 2 after the last renewal, plus scheduling
