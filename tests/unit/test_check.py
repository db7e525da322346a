"""alertd check: rule and config files, file:line:column findings, exit codes."""
from __future__ import annotations

import io
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from alertd.authoring.check import check, main
from alertd.config.settings import load_config
from alertd.cli.main import build_parser
from alertd.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")


def write(dir_: Path, name: str, text: str) -> Path:
    p = dir_ / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


def run(*paths, **kw) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = main([str(p) for p in paths], out, **kw)
    return code, out.getvalue().splitlines()


def findings(lines: list[str]) -> list[tuple[str, int, int, str]]:
    out = []
    for text in lines[:-1]:
        m = LINE.match(text)
        assert m, f"not file:line:column: {text!r}"
        out.append((Path(m["file"]).name, int(m["line"]), int(m["col"]), m["msg"]))
    return out


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A copy of the shipped rules with runbooks next to them."""
    shutil.copytree(ROOT / "rules", tmp_path / "rules", ignore=shutil.ignore_patterns("tests"))
    shutil.copytree(ROOT / "runbooks", tmp_path / "runbooks")
    return tmp_path


def test_the_shipped_rules_and_example_config_pass():
    code, lines = run(ROOT / "rules", ROOT / "examples" / "alertd.yml")
    assert code == 0, lines
    assert lines == ["SUCCESS: 10 rule files, 1 config file found"]
    report = check([ROOT / "rules"])
    assert report.ok and not report.warnings


def test_default_path_is_rules_dir(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert run()[0] == 0


def test_cli_exit_codes(tmp_path, capsys):
    assert cli_main(["check", str(ROOT / "rules")]) == 0
    bad = write(tmp_path, "bad.yml", "correlation:\n  hold_down: soon\n")
    assert cli_main(["check", str(bad)]) == 1
    assert "FAILED: 1 problem in 1 file" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["check", "--no-such-flag"])
    assert exc.value.code == 2


def test_schema_and_semantic_errors_carry_their_position(tmp_path):
    f = write(tmp_path, "site.yml", """\
        correlation:
          hold_down: 5 minutes
        signals:
          - kind: thermal
            match: ['alertname=~"(unclosed"']
          - kind: nonsense
            match: ['alertname="X"']
        """)
    code, lines = run(f)
    assert code == 1
    got = findings(lines)
    assert ("site.yml", 2, 14) in [g[:3] for g in got]
    assert any(g[1] == 2 and "hold_down" in g[3] for g in got)
    assert any(g[1] == 6 and "nonsense" in g[3] for g in got)
    assert lines[-1].startswith("FAILED: ")


def test_semantic_checks_run_once_the_schema_passes(tmp_path):
    f = write(tmp_path, "site.yml", """\
        signals:
          - kind: thermal
            match: ['alertname=~"(unclosed"']
        correlation:
          fold_window: 1m5h
          groups:
            - name: a
              by: [node]
            - name: a
              by: [alertname]
              allow_empty: true
        """)
    got = findings(run(f)[1])
    assert any(g[1:3] == (3, 13) and "bad regex" in g[3] for g in got), got
    assert any(g[1] == 5 and "out of order" in g[3] for g in got), got
    assert any(g[1] == 9 and "duplicate group name 'a'" in g[3] for g in got), got


def test_a_duration_longer_than_prometheus_allows_is_an_error_at_check(tmp_path):
    """A hold_down of 900000y used to pass check and then stop the engine (a timestamp plus it overflows)."""
    f = write(tmp_path, "long.yml", "correlation:\n  hold_down: 900000y\n  reopen_window: 292y\n")
    code, lines = run(f)
    got = findings(lines)
    assert code == 1
    assert [g[:3] for g in got] == [("long.yml", 2, 14)]
    assert "out of range" in got[0][3] and "hold_down" in got[0][3]


def test_yaml_syntax_and_duplicate_keys(tmp_path):
    a = write(tmp_path, "a.yml", "signals:\n  - kind: xid\n    match: [unclosed\n")
    b = write(tmp_path, "b.yml", "correlation:\n  hold_down: 1m\n  hold_down: 2m\n")
    got = findings(run(a, b)[1])
    assert any(g[0] == "a.yml" and "YAML syntax" in g[3] for g in got)
    assert ("b.yml", 3, 3, "duplicate key 'hold_down'") in got


def test_a_value_yaml_reads_but_python_cannot_hold_is_a_finding(tmp_path):
    """An unquoted timestamp that is no date (February 30th) made the YAML loader raise; it is a finding at
    its place, in alertd check and in alertd test alike."""
    f = write(tmp_path, "t.test.yml", "tests:\n  - name: x\n    start: 2026-02-30T00:00:00Z\n")
    code, lines = run(f)
    got = findings(lines)
    assert code == 1
    assert [g[:3] for g in got] == [("t.test.yml", 3, 12)]
    assert "'2026-02-30T00:00:00Z' is not a valid timestamp: day is out of range for month" in got[0][3]


def test_unknown_section(tmp_path):
    f = write(tmp_path, "x.yml", "signal:\n  - kind: xid\n")
    assert any("unknown section 'signal'" in g[3] for g in findings(run(f)[1]))


def test_unreachable_group_and_by_fields_nobody_sets(tmp_path):
    f = write(tmp_path, "c.yml", """\
        correlation:
          groups:
            - name: by-team
              match: ['signal!="other"']
              by: [cluster, team_name]
            - name: everything
              by: [alertname]
              allow_empty: true
            - name: never
              by: [node]
              allow_empty: true
        """)
    report = check([f])
    assert any(p.line == 9 and "group 'never' is unreachable" in p.message for p in report.errors), report.errors
    assert any(p.line == 5 and "'team_name'" in p.message for p in report.warnings), report.warnings
    # a label a matcher names is known to exist on some alerts
    g = write(tmp_path, "d.yml", """\
        correlation:
          groups:
            - name: by-team
              match: ['team_name!=""']
              by: [team_name]
            - name: rest
              by: [alertname]
              allow_empty: true
        """)
    assert not check([g]).warnings


def test_routing_cross_checks(site):
    routing = write(site / "rules", "routing.yml", """\
        routing:
          receivers:
            - {name: gpu-oncall, slack: "#gpu-oncall"}
            - {name: gpu-alerts, slack: "#gpu-alerts"}
          routes:
            - name: page-critical
              match: ['severity="critical"']
              receiver: gpu-oncall
            - name: everything-else
              receiver: gpu-alerts
            - name: after-the-catch-all
              match: ['severity="info"']
              receiver: no-such-receiver
          default_receiver: gpu-alerts
          mute_windows:
            - name: unused-window
              weekdays: [monday]
        """)
    report = check([site / "rules"])
    msgs = [(p.line, p.message) for p in report.errors]
    assert (13, "unknown receiver 'no-such-receiver'") in msgs, msgs
    assert any(line == 11 and "route 'after-the-catch-all' is unreachable: route 'everything-else'" in m
               for line, m in msgs), msgs
    warned = [(p.line, p.message) for p in report.warnings]
    assert any(line == 14 and "default_receiver is never used" in m for line, m in warned), warned
    assert any(line == 16 and "mute window 'unused-window' is not used" in m for line, m in warned), warned
    for p in report.errors + report.warnings:
        assert p.source == str(routing)


def test_same_matchers_in_another_order_or_spacing_are_the_same_route(tmp_path):
    f = write(tmp_path, "r.yml", """\
        routing:
          receivers: [{name: a, slack: "#a"}]
          routes:
            - {match: ['severity="critical"', 'signal="xid"'], receiver: a}
            - {match: ['signal = "xid"', 'severity="critical"'], receiver: a}
            - {match: ['signal="x y"'], receiver: a, continue: true}
            - {match: ['signal="x y"'], receiver: a}
        """)
    errors = check([f]).errors
    assert [p.line for p in errors] == [5], errors


def test_runbooks_that_do_not_exist_are_warnings(site):
    signals = site / "rules" / "signals.yml"
    signals.write_text(signals.read_text().replace("runbook: thermal", "runbook: thermals", 1))
    code, lines = run(site / "rules")
    assert code == 0
    assert any(": warning: runbook 'thermals' does not exist" in line for line in lines), lines
    assert lines[-1] == "SUCCESS: 10 rule files found (1 warning)"
    assert run(site / "rules", strict=True)[0] == 1
    (site / "runbooks" / "thermal.md").unlink()
    # the other thermal rule + the typo in signals.yml, the eight thermal entries of evidence.yml
    # (clock-event mask, thermal and power violation, nvidia-smi reasons, temperature, Autopilot's power
    # slowdown, two of alert names), the generic CloudEvent's thermal entry in sources.yml
    assert sum("does not exist" in line for line in run(site / "rules")[1]) == 11


def test_config_files_are_recognised_and_validated(tmp_path, monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    cfg = write(tmp_path, "alertd.yml", """\
        listen: 127.0.0.1:9095
        receiver:
          auth:
            bearer_token: ${NOT_SET_ANYWHERE}
        storage:
          retention: forever
        rules:
          paths: [missing-rules]
        """)
    report = check([cfg])
    assert report.config_files == [str(cfg)]
    errors = [(p.line, p.message) for p in report.errors]
    assert (6, "storage.retention: 'forever' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m "
               "(units: ms, s, m, h, d, w, y)") in errors
    assert any(line == 8 and "missing-rules does not exist" in m for line, m in errors), errors
    # the secret is not on the checking machine: a warning, not a failure
    assert any(p.line == 4 and "NOT_SET_ANYWHERE" in p.message for p in report.warnings)
    assert not any("NOT_SET_ANYWHERE" in m for _, m in errors)


def test_a_config_brings_its_rule_paths_and_pagerduty_keys(site):
    cfg = write(site, "alertd.yml", """\
        rules:
          paths: [rules]
        notify:
          pagerduty:
            routing_keys:
              gpu-infra: abc
        """)
    report = check([cfg])
    assert len(report.rule_files) == 10
    assert [p.message for p in report.errors] == [
        f"PagerDuty routing key 'gpu-infra-escalation' is not defined in notify.pagerduty.routing_keys of {cfg}"]
    assert report.errors[0].source.endswith("routing.yml") and report.errors[0].line > 0


def test_missing_path_and_empty_directory(tmp_path):
    code, lines = run(tmp_path / "nope.yml")
    assert code == 1 and "no such file" in lines[0]
    (tmp_path / "empty").mkdir()
    code, lines = run(tmp_path / "empty")
    assert code == 1 and "no rule or config files found" in lines[0]


def test_a_test_file_given_to_check_is_validated_against_the_test_schema(tmp_path):
    f = write(tmp_path, "x.test.yml", "tests:\n  - name: t\n    input: []\n    expect: [{at: soon}]\n")
    report = check([f])
    assert report.test_files == [str(f)] and report.errors and report.errors[0].line == 4


def test_storm_matchers_naming_no_signal_kind_are_warnings(site):
    corr = site / "rules" / "correlation.yml"
    text = corr.read_text()
    text = text.replace("""followers: ['signal=~"metrics_missing|node_not_ready"']""",
                        """followers: ['signal=~"metrics_missing|node_notready"', 'signal=~"exp.*"']""")
    text = text.replace("""match: ['signal="thermal"']""", """match: ['signal="thermals"']""")
    corr.write_text(text)
    code, lines = run(site / "rules")
    assert code == 0, lines  # warnings: the rules still load
    assert lines[-1] == "SUCCESS: 10 rule files found (3 warnings)", lines
    found = sorted((p.line, p.column, p.message.split(" names signal kind ")[1].split(",")[0])
                   for p in check([site / "rules"]).warnings if "names signal kind" in p.message)
    assert [kind for _, _, kind in found] == ["'thermals'", "'node_notready'", "'exp.*'"], found


def test_a_storm_event_keyed_by_no_storm_field_is_a_warning(site):
    corr = site / "rules" / "correlation.yml"
    text = corr.read_text()
    assert "by: [cluster, alertname]" in text  # the shipped unclassified event: the alert name is a storm field
    corr.write_text(text.replace("by: [cluster, alertname]", "by: [cluster, alert_name]"))
    found = [p for p in check([site / "rules"]).warnings if "is no storm field" in p.message]
    assert [(p.path, p.message.split(",")[0]) for p in found] == [
        ("correlation.storm.events[3].by[1]", "storm event 'unclassified' is keyed by 'alert_name'")], found


def test_relative_secret_files_are_read_from_the_config_files_directory(tmp_path, monkeypatch):
    """As ``alertd serve`` reads them (alertd.config.settings.load_config): ``check`` run from any directory agrees."""
    site = tmp_path / "etc"
    site.mkdir()
    (site / "secrets").mkdir()
    (site / "secrets" / "slack-token").write_text("xoxb-from-a-file\n")
    cfg = write(site, "alertd.yml", """\
        notify:
          slack:
            token_file: secrets/slack-token
            signing_secret_file: secrets/missing
        """)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    messages = [p.message for p in check([cfg]).errors]
    assert not any("slack-token" in m for m in messages), messages
    assert any(f"cannot read secret file {site / 'secrets' / 'missing'}" in m for m in messages), messages
    with pytest.raises(Exception, match="secrets/missing"):  # serve reads the same files, and fails the same way
        load_config(cfg)


def _documented_rma_section() -> str:
    """The ``rma:`` section as docs/remediation.md documents it."""
    doc = (ROOT / "docs/remediation.md").read_text()
    start = doc.index("```yaml\nrma:\n") + len("```yaml\n")
    return doc[start:doc.index("```", start)]


def test_a_service_config_with_the_documented_rma_section_is_checked_as_a_config(tmp_path, monkeypatch):
    monkeypatch.setenv("JIRA_API_TOKEN", "jira-api-token-0123456789")
    monkeypatch.setenv("RMA_WEBHOOK_SECRET", "rma-webhook-secret-0123456789")
    rules = shutil.copytree(ROOT / "rules", tmp_path / "rules", ignore=shutil.ignore_patterns("tests"))
    cfg = tmp_path / "alertd.yml"
    cfg.write_text(f"listen: 127.0.0.1:9095\nrules:\n  paths: [{rules}]\n" + _documented_rma_section())
    report = check([cfg])
    assert report.config_files == [str(cfg)] and str(cfg) not in report.rule_files
    assert report.errors == [], [p.message for p in report.errors]
    broken = tmp_path / "broken.yml"  # and checked as one: a wrong key in it is named
    broken.write_text(cfg.read_text().replace("  timeout: 10s", "  timeout: soon"))
    assert any("rma.timeout" in p.message for p in check([broken]).errors), [p.message for p in check([broken]).errors]


def test_a_rule_file_of_rma_rules_alone_is_still_a_rule_file(tmp_path):
    rma_rules = write(tmp_path, "rma.yml", """\
        rma:
          - name: fell-off-the-bus-twice
            any_of: [{xid: 79}]
        """)
    report = check([rma_rules])
    assert str(rma_rules) in report.rule_files and report.config_files == []
