"""The Alertmanager emulation of bench/fleetsim against the rules of dispatch.go and notify.go."""
from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import pytest

from bench.fleetsim.alertmanager import Dispatcher, RouteConfig, rfc3339
from bench.fleetsim.labelset import alert_sort_key, fingerprint, label_string
from bench.fleetsim.prometheus import Instance
from bench.fleetsim.rules import AlertRule

START = datetime(2026, 11, 2, tzinfo=timezone.utc)
RULE = AlertRule("GPUXidError", "gpu-dcgm", "xid > 0")
ROUTE = RouteConfig("test", ("alertname", "cluster"), group_wait=30, group_interval=300, repeat_interval=4 * 3600,
                    dup_probability=0.0)
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "alertd" / "schemas" / "webhook.schema.json").read_text())


def inst(node: str, starts: float, resolved: float | None = None, *, name: str = "GPUXidError") -> Instance:
    labels = {"alertname": name, "cluster": "c1", "node": node}
    return Instance(RULE, labels, fingerprint(labels), {"summary": node}, starts, starts, resolved, "P1",
                    retained_until=(resolved or 0) + 900)


def run(puts, route: RouteConfig = ROUTE, until: float = 10_000, seed: int = 0):
    d = Dispatcher(route, START, random.Random(seed))
    return d.run(sorted(puts, key=lambda p: p[0]), until)


def sent(flushes):
    """(time, [(node, status)]) per notification."""
    return [(f.at, [(a["labels"]["node"], a["status"]) for a in f.body["alerts"]]) for f in flushes]


def test_fingerprints_are_alertmanagers():
    # Values from Alertmanager's own tests (template/template_test.go, api/v2/api_test.go).
    assert fingerprint({"severity": "warning", "job": "foo"}) == "9266ef3da838ad95"
    assert fingerprint({"severity": "critical", "job": "foo"}) == "3b15fd163d36582e"
    assert fingerprint({"severity": "critical", "alertname": "alert1"}) == "0223b772b51c29e1"


def test_group_wait_then_group_interval_batches():
    a, b, c = inst("n1", 100), inst("n2", 110), inst("n3", 200)
    out = sent(run([(100, a, False), (110, b, False), (200, c, False)]))
    assert out == [(130, [("n1", "firing"), ("n2", "firing")]),
                   (430, [("n1", "firing"), ("n2", "firing"), ("n3", "firing")])]


def test_an_old_alert_flushes_a_new_group_at_once():
    a = inst("n1", 0)
    assert sent(run([(100, a, False)])) == [(100, [("n1", "firing")])]


def test_a_resolved_alert_alone_never_sent_when_nothing_was_notified():
    """An Xid that fired and resolved inside group_wait: needsUpdate(nil entry) needs a firing alert."""
    a = inst("n1", 100, 110)
    assert run([(100, a, False), (110, a, True)]) == []


def test_a_resolved_alert_rides_along_with_firing_ones():
    a, b = inst("n1", 100, 110), inst("n2", 105)
    assert sent(run([(100, a, False), (105, b, False), (110, a, True)])) == [
        (130, [("n1", "resolved"), ("n2", "firing")])]


def test_resolution_sent_at_the_next_group_interval_and_the_alert_leaves_the_group():
    a, b = inst("n1", 100, 200), inst("n2", 100)
    out = sent(run([(100, a, False), (100, b, False), (200, a, True)], until=2000))
    assert out == [(130, [("n1", "firing"), ("n2", "firing")]), (430, [("n1", "resolved"), ("n2", "firing")])]


def test_all_resolved_is_sent_once_then_the_group_is_quiet():
    a = inst("n1", 100, 200)
    out = sent(run([(100, a, False), (200, a, True), (290, a, True), (380, a, True)], until=5000))
    assert out == [(130, [("n1", "firing")]), (430, [("n1", "resolved")])]


def test_repeat_interval_resends_unchanged_groups():
    route = RouteConfig("t", ("alertname",), group_wait=30, group_interval=300, repeat_interval=1200,
                        dup_probability=0.0)
    out = run([(0, inst("n1", 0), False)], route, until=2500)
    # A flush every 300 s; only those more than 1200 s after the last notification send.
    assert [f.at for f in out] == [30, 1530]


def test_a_group_emptied_and_cleaned_up_starts_over_with_group_wait():
    a, b = inst("n1", 100, 200), inst("n1", 1000)
    b.fingerprint = a.fingerprint + "x"
    out = run([(100, a, False), (200, a, True), (1000, b, False)], until=3000)
    # 430: resolved sent, group empty; a cleanup tick removes it; 1000 makes a new group: 1030.
    assert [f.at for f in out] == [130, 430, 1030]


def test_a_refire_between_two_flushes_is_not_news():
    """The notification log keys alerts by labels, not startsAt: resolved and firing again before the
    next flush looks unchanged, so the new spell waits for repeat_interval."""
    a1, a2 = inst("n1", 100, 200), inst("n1", 250)
    out = run([(100, a1, False), (200, a1, True), (250, a2, False)], until=20_000)
    assert [(f.at, f.body["alerts"][0]["startsAt"]) for f in out] == [
        (130, rfc3339(START, 100)), (130 + 49 * 300, rfc3339(START, 250))]  # Timestamp.Before(now - repeat): strictly


def test_ha_peer_sends_a_copy_peer_timeout_later_when_gossip_lags():
    route = RouteConfig("t", ("alertname",), dup_probability=1.0)
    out = run([(0, inst("n1", 0), False)], route, until=100)
    assert [(round(f.at), f.peer) for f in out] == [(30, 0), (45, 1)]
    assert out[0].body == out[1].body


def test_body_is_a_webhook_v4_alertd_accepts():
    a, b = inst("n2", 100), inst("n1", 100, 120)
    out = run([(100, a, False), (100, b, False), (120, b, True)])
    body = out[0].body
    jsonschema.validate(body, SCHEMA)
    assert body["groupKey"] == '{}:{alertname="GPUXidError", cluster="c1"}'
    assert body["groupLabels"] == {"alertname": "GPUXidError", "cluster": "c1"}
    assert body["commonLabels"] == {"alertname": "GPUXidError", "cluster": "c1"}
    assert body["status"] == "firing" and body["truncatedAlerts"] == 0 and body["version"] == "4"
    firing = next(x for x in body["alerts"] if x["status"] == "firing")
    assert firing["endsAt"] == "0001-01-01T00:00:00Z"
    resolved = next(x for x in body["alerts"] if x["status"] == "resolved")
    assert resolved["endsAt"] == rfc3339(START, 120)


@pytest.mark.parametrize("t,text", [(0, "2026-11-02T00:00:00Z"), (1.5, "2026-11-02T00:00:01.5Z"),
                                    (30.004, "2026-11-02T00:00:30.004Z")])
def test_times_read_like_go(t, text):
    assert rfc3339(START, t) == text


def test_label_order_and_alert_order():
    assert label_string({"b": "x", "a": 'q"'}) == '{a="q\\"", b="x"}'
    with_job = {"job": "a", "alertname": "Z"}
    without = {"alertname": "A"}
    assert sorted([without, with_job], key=alert_sort_key) == [with_job, without]
