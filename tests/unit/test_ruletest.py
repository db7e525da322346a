"""alertd test: the rule unit test runner and the shipped rule tests."""
from __future__ import annotations

import io
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from alertd.authoring.ruletest import expand_input, main, run_file
from alertd.authoring.virtual import VirtualRun, load_rule_set
from alertd.cli.main import main as cli_main
from alertd.engine.pipeline import Engine
from alertd.core.model import Alert
from alertd.receive.payload import fingerprint_of

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"
SHIPPED_TESTS = sorted((RULES / "tests").glob("*.test.yml"))
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def write(tmp_path: Path, text: str, name: str = "t.test.yml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).replace("RULES", str(RULES)))
    return p


def output(*files) -> tuple[int, str]:
    out = io.StringIO()
    code = main([str(f) for f in files], None, out)
    return code, out.getvalue()


@pytest.mark.parametrize("path", SHIPPED_TESTS, ids=lambda p: p.name)
def test_shipped_rule_tests_pass(path):
    result = run_file(path)
    assert result.ok, "\n".join(map(str, result.problems + result.failures))
    assert result.tests == result.passed > 0


def test_every_shipped_rule_file_has_tests():
    names = {p.name for p in SHIPPED_TESTS}
    assert {"xid.test.yml", "node.test.yml", "thermal.test.yml", "lifecycle.test.yml", "watchdog.test.yml",
            "storm.test.yml", "routing.test.yml", "suppression.test.yml"} <= names
    text = "".join(p.read_text() for p in SHIPPED_TESTS)
    # every alert name the signal rules classify appears in some test input
    import yaml

    for rule in yaml.safe_load((RULES / "signals.yml").read_text())["signals"]:
        for matcher in rule["match"]:
            if matcher.startswith("alertname="):
                for name in matcher.split('"')[1].split("|"):
                    assert f"alertname: {name}" in text, name


def test_default_files_and_exit_codes(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert cli_main(["test"]) == 0
    out = capsys.readouterr().out
    assert out.count("SUCCESS") == len(SHIPPED_TESTS)
    assert cli_main(["test", "rules/tests/xid.test.yml", "--run", "Xid 45"]) == 0
    assert "SUCCESS (3 tests)" in capsys.readouterr().out


FAILING = """\
    rule_files: [RULES]
    defaults:
      labels: {cluster: c}
    tests:
      - name: wrong severity
        input:
          - at: 0s
            labels: {alertname: GPUXidError, xid: 79, node: n1, gpu: 0}
        expect:
          - at: 1m
            incidents:
              - key: node|cluster=c|node=n1
                severity: warning
                signals: [xid]
      - name: unexpected extra incident
        input:
          - {at: 0s, labels: {alertname: GPUXidError, xid: 79, node: n1, gpu: 0}}
          - {at: 0s, labels: {alertname: GPUXidError, xid: 79, node: n2, gpu: 0}}
        expect:
          - at: 1s
            count: 3
            incidents:
              - {node: n1}
      - name: fine
        input: []
        expect:
          - {at: 1s, count: 0}
    """


def test_failures_name_the_test_the_time_and_the_field(tmp_path):
    f = write(tmp_path, FAILING)
    code, text = output(f)
    assert code == 1
    assert "FAILED: 2 failed of 3 tests" in text
    assert f"{f}:10:9: test 'wrong severity': at 1m:" in text
    assert "- severity: 'warning'" in text and "+ severity: 'critical'" in text
    assert "signals" not in text.split("unexpected extra")[0].split("test 'wrong severity'")[1].split("\n", 3)[3]
    assert "count: expected 3 incidents, got 2" in text
    assert "unexpected incident INC-2" in text and "node|cluster=c|node=n2" in text


def test_partial_allows_unlisted_incidents(tmp_path):
    f = write(tmp_path, FAILING.replace("count: 3", "partial: true"))
    result = run_file(f)
    assert [x.test for x in result.failures] == ["wrong severity"]


def test_a_bad_test_file_is_reported_with_its_position(tmp_path):
    f = write(tmp_path, """\
        rule_files: [RULES]
        tests:
          - name: t
            input:
              - at: 10 minutes
                labels: {alertname: A}
            expect:
              - {at: 1m, incidents: [{severity: fatal}]}
        """)
    result = run_file(f)
    lines = [str(p) for p in result.problems]
    assert f"{f}:5:13: tests[0].input[0].at: '10 minutes' is not a time: use a duration after t0" in "\n".join(lines)
    assert any(line.startswith(f"{f}:8:41: ") and "fatal" in line for line in lines), lines
    g = write(tmp_path, "tests:\n  - name: t\n    input: []\n    expect: [{at: 1m1m}]\n", "g.test.yml")
    assert "units out of order or repeated" in str(run_file(g).problems[0])


def test_broken_rules_fail_the_file(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "c.yml").write_text("correlation:\n  hold_down: 5 minutes\n")
    f = write(tmp_path / "rules", "tests:\n  - name: t\n    input: []\n    expect: [{at: 1s}]\n", "c.test.yml")
    code, text = output(f)
    assert code == 1 and "c.yml:2:14: correlation.hold_down" in text
    missing = write(tmp_path, "rule_files: [nowhere]\ntests:\n  - {name: t, input: [], expect: [{at: 1s}]}\n", "m.test.yml")
    assert "nowhere does not exist" in str(run_file(missing).problems[0])


def test_routing_expectations_without_routing_are_an_error(tmp_path):
    f = write(tmp_path, """\
        rule_files: [RULES/xid-catalog.yml, RULES/signals.yml, RULES/correlation.yml]
        tests:
          - name: needs routing
            input: [{at: 0s, labels: {alertname: GPUXidError, xid: 79, node: n1}}]
            expect:
              - at: 1s
                incidents: [{notified: ["slack:#gpu-oncall"]}]
        """)
    result = run_file(f)
    assert len(result.failures) == 1
    assert "need a routing section" in result.failures[0].message


def test_acting_on_an_unknown_incident_fails(tmp_path):
    f = write(tmp_path, """\
        rule_files: [RULES]
        tests:
          - name: ack
            input: []
            actions: [{at: 1s, action: acknowledge, incident: INC-7}]
            expect: [{at: 2s, count: 0}]
        """)
    result = run_file(f)
    assert "cannot acknowledge INC-7: no such incident yet" in result.failures[0].message


def test_input_keeps_startsat_across_repeats_and_ends_resolved_alerts():
    items = [
        {"at": "0s", "labels": {"alertname": "A", "xid": 79}, "every": "1m", "until": "2m"},
        {"at": "3m", "labels": {"alertname": "A", "xid": 79}, "status": "resolved"},
        {"at": "5m", "labels": {"alertname": "A", "xid": 79}},
    ]
    got = expand_input(items, {"labels": {"cluster": "c"}}, T0)
    assert [t - T0 for t, _ in got] == [timedelta(minutes=m) for m in (0, 1, 2, 3, 5)]
    alerts = [a for _, a in got]
    assert alerts[0].labels == {"cluster": "c", "alertname": "A", "xid": "79"}
    assert {a.fingerprint for a in alerts} == {fingerprint_of(alerts[0].labels)}
    assert [a.starts_at - T0 for a in alerts] == [timedelta(0)] * 4 + [timedelta(minutes=5)]
    assert alerts[3].status == "resolved" and alerts[3].ends_at == T0 + timedelta(minutes=3)
    assert alerts[4].ends_at is None


def _alert(name: str, node: str, at: datetime, status: str = "firing", starts: datetime | None = None) -> Alert:
    labels = {"alertname": name, "cluster": "c", "node": node, "xid": "79"}
    return Alert(fingerprint_of(labels), status, labels, {}, starts or at, at if status == "resolved" else None,
                 received_at=at)


def test_jumping_the_clock_equals_ticking_every_second():
    """The virtual run skips idle seconds; the result must be what a 1 s ticker gives."""
    rules = load_rule_set([RULES])
    s = lambda sec: T0 + timedelta(seconds=sec)  # noqa: E731
    script = [
        (s(0), [_alert("GPUXidError", "n1", s(0)), _alert("Watchdog", "", s(0))]),
        (s(30.5), [_alert("GPUXidError", "n1", s(30.5), "resolved", s(0))]),
        (s(200), [_alert("GPUXidError", "n2", s(200))]),
        (s(250.25), [_alert("GPUXidError", "n2", s(250.25), "resolved", s(200))]),
        (s(400), [_alert("GPUXidError", "n2", s(400))]),
    ]
    end = s(2000)

    run = VirtualRun(rules, T0)
    for at, alerts in script:
        run.receive([_copy(a) for a in alerts], at)
    run.advance(end)

    engine, seen, t = Engine(rules), {}, T0
    pending = list(script)
    while t <= end:
        while pending and pending[0][0] <= t:
            at, alerts = pending.pop(0)
            for c in engine.ingest([_copy(a) for a in alerts], at):  # a Watchdog is a heartbeat there
                seen.setdefault(c.incident.id, c.incident)
        for c in engine.tick(t):
            seen.setdefault(c.incident.id, c.incident)
        t += timedelta(seconds=1)

    def summary(incidents):
        return sorted((i.id, i.key, i.status, i.resolved_at, i.flaps, i.previous_id) for i in incidents.values())

    assert summary(run.incidents) == summary(seen)
    assert run.incidents["INC-1"].resolved_at == s(331)  # resolved 30.5 s + 5 m hold-down, next whole second
    assert any(i.key == "watchdog|pipeline" and i.opened_at == s(601) for i in run.incidents.values())


def _copy(a: Alert) -> Alert:
    return Alert(a.fingerprint, a.status, dict(a.labels), dict(a.annotations), a.starts_at, a.ends_at,
                 received_at=a.received_at)


def test_a_dry_run_routes_to_every_integration_a_receiver_names(tmp_path):
    """Without a service config, a dry run shows an Opsgenie or webhook receiver's real target, not the
    console fallback a service without those notifiers would use."""
    from alertd.authoring.virtual import build_router
    from alertd.integrations.registry import INTEGRATIONS
    from alertd.notify.router import Router

    router = build_router(load_rule_set([str(RULES)]))
    assert isinstance(router, Router)
    assert router.available == set(INTEGRATIONS) >= {"opsgenie", "webhook", "slack", "pagerduty", "console"}
