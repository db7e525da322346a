"""Notifier and router setup from the config, config schemas, and the silence matchers for incidents."""
from __future__ import annotations

from datetime import timedelta

import pytest

from alertd.alertmanager.silences import AlertmanagerError, silence_matchers
from alertd.config.settings import parse_config
from alertd.core.errors import InvalidDocument
from alertd.integrations.console import ConsoleNotifier
from alertd.integrations.pagerduty import PagerDutyNotifier
from alertd.notify.router import ConsoleRouter, Router
from alertd.rules.routing import default_routing
from alertd.app.notifiers import build_notifiers, build_router, check_keys
from alertd.integrations.slack.integration import SlackNotifier, SlackSettings
from alertd.rules.ruleset import RuleSet
from alertd.app.service import utcnow
from testkit.builders import alert, at, engine, shipped_rules, xid


def cfg(**notify):
    return parse_config({"notify": notify}, "test", env={})


def test_console_is_the_default_without_a_slack_token():
    c = cfg()
    notifiers = build_notifiers(c, None, utcnow)
    assert list(notifiers) == ["console"] and isinstance(notifiers["console"], ConsoleNotifier)
    assert isinstance(build_router(c, RuleSet()), ConsoleRouter)
    # with the shipped routing: routed, but every target falls back to the console
    router = build_router(c, shipped_rules())
    assert isinstance(router, Router) and router.available == {"console"}
    items = router.route(engine().ingest([xid(79, node="n1")], at(0)), at(0))
    assert {i.target for i in items} == {"console"}


def test_empty_token_from_the_environment_means_no_slack():
    c = parse_config({"notify": {"slack": {"token": "${SLACK_BOT_TOKEN:-}"}}}, "test", env={})
    assert "slack" not in build_notifiers(c, None, utcnow)


def test_slack_and_pagerduty_when_configured():
    c = cfg(slack={"token": "xoxb-1", "debounce": "3s", "rate": {"per_channel": 2, "burst": 3}},
            pagerduty={"routing_keys": {"gpu-infra": "k" * 32}})
    notifiers = build_notifiers(c, None, utcnow)
    assert isinstance(notifiers["slack"], SlackNotifier) and isinstance(notifiers["pagerduty"], PagerDutyNotifier)
    s = notifiers["slack"].settings
    assert (s.debounce, s.per_channel, s.burst, s.base_url) == (timedelta(seconds=3), 2.0, 3, "https://slack.com/api/")
    router = build_router(c, shipped_rules())
    assert router.debounce == timedelta(seconds=3) and router.available == {"console", "slack", "pagerduty"}
    assert check_keys(c, shipped_rules().routing) == ["gpu-infra-escalation"]


def test_default_channel_without_routing_section():
    c = cfg(slack={"token": "xoxb-1", "default_channel": "#gpu"})
    router = build_router(c, RuleSet())
    assert isinstance(router, Router) and router.routing == default_routing("#gpu")
    items = router.route(engine().ingest([alert("Anything", node="n1")], at(0)), at(0))
    assert [i.target for i in items] == ["slack:#gpu"]


def test_console_disabled_and_nothing_else():
    c = parse_config({"notify": {"console": {"enabled": False}}}, "test", env={})
    router = build_router(c, shipped_rules())
    assert router.route(engine().ingest([xid(79, node="n1")], at(0)), at(0)) == []


def test_config_schemas_refuse_unknown_keys():
    with pytest.raises(InvalidDocument, match="unknown key"):
        cfg(slack={"tokn": "x"})
    with pytest.raises(InvalidDocument):
        cfg(slack={"debounce": "2 seconds"})
    with pytest.raises(InvalidDocument, match="unknown key"):
        parse_config({"alertmanager": {"url": "http://am", "uri": "http://am"}}, "test", env={})
    assert SlackSettings.from_config(cfg(slack={"token": "x", "timeout": "5s"})).timeout == 5.0


# ----- silence matchers -----

def test_gpu_level_incident_is_silenced_by_node_cluster_and_uuid():
    inc = engine().ingest([xid(79, node="n1", gpu="3")], at(0))[0].incident
    assert silence_matchers(inc) == [
        {"name": "alertname", "value": "GPUXidError", "isRegex": False, "isEqual": True},
        {"name": "xid", "value": "79", "isRegex": False, "isEqual": True},
        {"name": "node", "value": "n1", "isRegex": False, "isEqual": True},
        {"name": "cluster", "value": "prod", "isRegex": False, "isEqual": True},
        {"name": "UUID", "value": "GPU-n1-3", "isRegex": False, "isEqual": True},
    ]


def test_node_level_incident_has_no_gpu_matcher():
    inc = engine().ingest([xid(79, node="n1", gpu="0"), xid(79, node="n1", gpu="1")], at(0))[0].incident
    assert [m["name"] for m in silence_matchers(inc)] == ["alertname", "xid", "node", "cluster"]


def test_node_from_instance_label_matches_any_port():
    a = alert("NodeDown", instance="10.0.0.7:9100", severity="critical")
    inc = engine().ingest([a], at(0))[0].incident
    m = silence_matchers(inc)[1]
    assert m == {"name": "instance", "value": r"10\.0\.0\.7(:[0-9]+)?", "isRegex": True, "isEqual": True}


def test_fleet_incident_is_silenced_on_all_its_nodes():
    changes = engine().ingest([xid(79, node=f"n{i}", starts=i) for i in range(6)], at(10))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    children = [m for c in changes if c.incident.parent_id == fleet.id for m in c.incident.members.values()]
    m = silence_matchers(fleet, children)[2]
    assert m["isRegex"] and m["name"] == "node" and m["value"].split("|") == sorted(fleet.nodes)


def test_nothing_to_silence_is_an_error():
    inc = engine().ingest([alert("Orphan", severity="warning")], at(0))[0].incident
    inc.cluster = ""
    for m in inc.members.values():
        m.labels.pop("cluster", None)
    with pytest.raises(AlertmanagerError):
        silence_matchers(inc)
