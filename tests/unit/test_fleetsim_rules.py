"""bench/fleetsim's Prometheus side: a predicate per shipped rule, the for/keep_firing_for machine, staleness."""
from __future__ import annotations

import yaml

from bench.fleetsim import model as m
from bench.fleetsim.predicates import PREDICATES, Grid, NodeView
from bench.fleetsim.prometheus import alert_instances, sends
from bench.fleetsim.rules import SHIPPED, AlertRule, load_alert_rules
from bench.fleetsim.sim import MissingPredicate, check_rules

GRID = Grid(30.0, 0.0)
DAY = 86400.0


def node(*facts: m.Fact) -> NodeView:
    n = m.Node("h100-a-r000-n00", "h100-a", 0, 0)
    n.facts.extend(facts)
    return NodeView(n)


def fired(rule_name: str, view: NodeView, rules: list[AlertRule] | None = None) -> list[tuple[float, float | None]]:
    rule = next(r for r in (rules or load_alert_rules()) if r.name == rule_name)
    out = []
    for s in PREDICATES[rule_name](view, GRID):
        out += [(i.starts_at, i.resolved_at) for i in alert_instances(rule, s.labels, s.spans, s.value, GRID, DAY)]
    return out


def test_every_alerting_rule_of_the_shipped_file_has_a_predicate():
    doc = yaml.safe_load(SHIPPED.read_text())
    names = {r["alert"] for g in doc["groups"] for r in g["rules"] if "alert" in r}
    assert names, "no alerting rules read"
    assert names <= set(PREDICATES), f"rules without a predicate: {sorted(names - set(PREDICATES))}"
    check_rules(load_alert_rules())


def test_a_rule_without_a_predicate_is_refused(tmp_path):
    f = tmp_path / "r.yml"
    f.write_text("groups: [{name: g, rules: [{alert: GPUNew, expr: 'vector(1)'}]}]")
    try:
        check_rules(load_alert_rules(f))
    except MissingPredicate as exc:
        assert "GPUNew" in str(exc)
    else:
        raise AssertionError("a rule without a predicate passed")


XID_KEEP = next(r for r in load_alert_rules() if r.name == "GPUXidError").keep_firing_for


def test_for_and_keep_firing_for_come_from_the_file(tmp_path):
    text = SHIPPED.read_text()
    at = text.index("      - alert: GPUXidError\n")
    text = text[:at] + text[at:].replace("keep_firing_for: 2m\n", "keep_firing_for: 15m\n", 1)
    f = tmp_path / "gpu-alerts.yml"
    f.write_text(text)
    view = node(m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79))
    plain = fired("GPUXidError", view)
    kept = fired("GPUXidError", view, load_alert_rules(f))
    assert plain == [(1020.0, 1020.0 + 270.0 + XID_KEEP)]  # changes()[5m] holds 5m minus one scrape interval
    assert kept == [(1020.0, 1020.0 + 270.0 + 900.0)]


def test_the_shipped_xid_alert_outlives_group_wait_and_group_interval():
    """Alertmanager's defaults: 30s + 5m. Shorter, an Xid that fires just after its group's flush can resolve
    before the next one, and the DedupStage sends nothing for it."""
    [(start, end)] = fired("GPUXidError", node(m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79)))
    assert end - start >= 30.0 + 300.0


def test_an_exporter_hang_does_not_end_the_xid_alert_it_reported():
    view = node(m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79), m.Fact(m.EXPORTER_DOWN, 1075.0, 5000.0, "P"))
    # the series is stale at once, but last_over_time and changes over [5m] read the samples in the range
    assert fired("GPUXidError", view) == [(1020.0, 1020.0 + 270.0 + XID_KEEP)]


def test_an_xid_during_an_exporter_outage_is_never_seen():
    view = node(m.Fact(m.EXPORTER_DOWN, 900.0, 1500.0, "P"), m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79))
    assert fired("GPUXidError", view) == []


def test_the_same_code_again_leaves_the_gauge_unchanged_until_the_driver_reloads():
    view = node(m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79), m.Fact(m.XID, 2000.0, 2000.0, "P", 3, 79),
                m.Fact(m.NODE_DOWN, 3000.0, 3300.0, "P"), m.Fact(m.XID, 4000.0, 4000.0, "P", 3, 79))
    assert [s for s, _ in fired("GPUXidError", view)] == [1020.0, 4020.0]


def test_for_drops_a_pending_alert_and_delays_a_firing_one():
    short = node(m.Fact(m.NODE_DOWN, 1000.0, 1100.0, "P"))
    long = node(m.Fact(m.NODE_DOWN, 1000.0, 1400.0, "P"))
    assert fired("NodeDown", short) == []
    assert fired("NodeDown", long) == [(1140.0, 1410.0)]  # active at 1020, for: 2m


def test_exporter_down_is_held_back_while_the_node_is_down():
    view = node(m.Fact(m.NODE_DOWN, 1000.0, 2000.0, "P"), m.Fact(m.EXPORTER_DOWN, 1000.0, 2000.0, "P"))
    assert fired("DCGMExporterDown", view) == []
    assert fired("NodeDown", view)


def test_gpu_count_dropped_holds_at_most_an_hour():
    view = node(m.Fact(m.GPU_GONE, 1000.0, 20000.0, "P", 2))
    [(start, end)] = fired("GPUCountDropped", view)
    keep = next(r for r in load_alert_rules() if r.name == "GPUCountDropped").keep_firing_for
    assert start == 1020.0 + 60.0 and end == 1000.0 + 3600.0 + 20.0 + keep


def test_resolved_alerts_are_sent_again_for_15_minutes():
    rule = next(r for r in load_alert_rules() if r.name == "NodeDown")
    [inst] = alert_instances(rule, {"cluster": "c", "node": "n"}, [(1000.0, 1400.0, "P")], 0.0, GRID, DAY)
    times = [round(t - 0.004, 3) for t, resolved in sends(inst, GRID) if resolved]
    # needsSending: LastSentAt + 1m < ts, so every 90 s at a 30 s evaluation interval, for 15 minutes.
    assert times == [1410.0 + 90.0 * k for k in range(11)]


def test_with_or_without_staleness_markers_a_hung_exporters_xid_stays_for_its_window():
    n = m.Node("h100-a-r000-n00", "h100-a", 0, 0)
    n.facts += [m.Fact(m.XID, 1000.0, 1000.0, "P", 3, 79), m.Fact(m.EXPORTER_DOWN, 1075.0, 5000.0, "P")]
    # changes() counts only samples taken: the window still holds the step for 270 s after it was seen.
    assert fired("GPUXidError", NodeView(n, lookback=300.0)) == [(1020.0, 1020.0 + 270.0 + XID_KEEP)]
    assert fired("GPUXidError", NodeView(n)) == [(1020.0, 1020.0 + 270.0 + XID_KEEP)]
