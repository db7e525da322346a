"""What a first-time operator's typos get: a route matcher on a field no incident has is refused, and
every file speaks one language (matchers, durations with an example, "did you mean", secrets by rule,
ports in range)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from alertd.authoring.check import check
from alertd.cli.main import build_parser
from alertd.config.settings import parse_config
from alertd.core.errors import InvalidDocument

ROOT = Path(__file__).resolve().parents[2]
RECEIVERS = 'routing:\n  receivers:\n    - name: oncall\n      slack: "#gpu-oncall"\n'


def checked(tmp_path: Path, name: str, text: str) -> tuple[list[str], list[str]]:
    path = tmp_path / name
    path.write_text(text)
    report = check([path])
    return [str(p) for p in report.errors], [str(p) for p in report.warnings]


def test_a_route_matcher_on_a_misspelt_field_is_refused(tmp_path):
    """``sigal!="other"`` is true of every incident (a missing field matches ""): the route takes all."""
    errors, _ = checked(tmp_path, "routing.yml", RECEIVERS + "  routes:\n    - receiver: oncall\n"
                                                             "      match: ['sigal!=\"other\"']\n")
    assert len(errors) == 1, errors
    assert "routing.yml:7:15" in errors[0] and "'sigal'" in errors[0] and "did you mean 'signal'?" in errors[0]


def test_a_site_label_is_declared_or_warned_about(tmp_path):
    route = "  routes:\n    - receiver: oncall\n      match: ['rack=\"r12\"']\n"
    errors, warnings = checked(tmp_path, "routing.yml", RECEIVERS + route)
    assert not errors and len(warnings) == 1 and "'rack'" in warnings[0] and "routing.labels" in warnings[0]
    errors, warnings = checked(tmp_path, "routing.yml", RECEIVERS + "  labels: [rack]\n" + route)
    assert not errors and not warnings, (errors, warnings)


def test_incident_fields_and_known_labels_pass(tmp_path):
    matchers = ['severity="critical"', 'xids=~"(.*,)?79(,.*)?"', 'fleet="true"', 'alertname="GPUXidError"',
                'team="ml"', 'Hostname="x"', 'maintenance!="true"']
    route = "  routes:\n" + "".join(f"    - receiver: oncall\n      match: ['{m}']\n      continue: true\n"
                                    for m in matchers)
    errors, warnings = checked(tmp_path, "routing.yml", RECEIVERS + "  labels: [maintenance]\n" + route)
    assert not errors and not warnings, (errors, warnings)


def test_the_shipped_rules_check_clean():
    report = check([ROOT / "rules"])
    assert report.ok and not report.warnings, report.lines()


def test_a_matcher_typo_reads_the_same_in_correlation_as_in_routing(tmp_path):
    errors, _ = checked(tmp_path, "correlation.yml", "correlation:\n  storm:\n    followers: ['signal:xid']\n")
    assert any("bad matcher 'signal:xid': expected name=\"value\"" in e for e in errors), errors
    assert not any("does not match" in e for e in errors), errors
    routed, _ = checked(tmp_path, "routing.yml", RECEIVERS + "  routes:\n    - receiver: oncall\n"
                                                             "      match: ['signal:xid']\n")
    assert any("bad matcher 'signal:xid': expected name=\"value\"" in e for e in routed), routed


def test_a_bad_duration_shows_an_example(tmp_path):
    errors, _ = checked(tmp_path, "correlation.yml", "correlation:\n  hold_down: 5 minutes\n")
    assert any("'5 minutes' is not a duration" in e and "1h30m" in e for e in errors), errors
    assert not any("(ms|s|m|h" in e for e in errors), errors


@pytest.mark.parametrize("name,text,typo,meant", [
    ("correlation.yml", "correlation:\n  holddown: 5m\n", "holddown", "hold_down"),
    ("routing.yml", RECEIVERS + "  group_wiat: 2s\n", "group_wiat", "group_wait"),
    ("alertd.yml", "listen: 127.0.0.1:9095\nlog: {formt: json}\n", "formt", "format"),
])
def test_an_unknown_key_gets_did_you_mean(tmp_path, name, text, typo, meant):
    errors, _ = checked(tmp_path, name, text)
    assert any(f"unknown key(s) '{typo}' (did you mean '{meant}'?)" in e for e in errors), errors


def test_a_short_token_names_the_rule_it_broke(tmp_path):
    (tmp_path / "admin").write_text("tiny-secret\n")
    with pytest.raises(InvalidDocument) as exc:
        parse_config({"api": {"auth": {"tokens": [{"name": "admin", "token_file": str(tmp_path / "admin")}]}}}, "c.yml")
    text = str(exc.value)
    assert "api.auth.tokens[0].token: the value read from its secret file is shorter than the 16 characters" in text
    assert "tiny-secret" not in text


@pytest.mark.parametrize("listen,port", [("127.0.0.1:99999", 99999), ("[::1]:65536", 65536), ("0.0.0.0:0", 0)])
def test_a_port_out_of_range_is_refused_naming_it(listen, port):
    with pytest.raises(InvalidDocument) as exc:
        parse_config({"listen": listen}, "c.yml")
    assert f"port {port} of {listen!r} is out of range: a port is 1-65535" in str(exc.value)


def test_the_listen_flag_is_refused_out_of_range(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--listen", "127.0.0.1:99999"])
    assert "port 99999" in capsys.readouterr().err
    assert build_parser().parse_args(["serve", "--listen", "127.0.0.1:65535"]).listen == "127.0.0.1:65535"


def test_an_unreadable_token_file_is_one_problem_not_two():
    with pytest.raises(InvalidDocument) as exc:
        parse_config({"api": {"auth": {"tokens": [{"name": "admin", "token_file": "/nonexistent/api-admin"}]}}}, "c.yml")
    assert [p.message for p in exc.value.problems] == [
        "api.auth.tokens[0].token_file: cannot read secret file /nonexistent/api-admin: No such file or directory"]


def test_the_check_knows_the_fields_routing_sees_and_the_header_lists_them():
    from alertd.authoring.route_fields import INCIDENT_FIELDS
    from alertd.rules.fields import incident_fields
    from testkit.builders import T0, engine, xid

    inc = engine().ingest([xid(79)], T0)[0].incident
    seen = set(incident_fields(inc))
    labels = {k for m in inc.members.values() for k in m.labels}
    assert INCIDENT_FIELDS <= seen and seen - labels <= INCIDENT_FIELDS
    header = (ROOT / "rules" / "routing.yml").read_text().split("\nrouting:", 1)[0]
    assert all(re.search(rf"\b{name}\b", header) for name in INCIDENT_FIELDS), header
