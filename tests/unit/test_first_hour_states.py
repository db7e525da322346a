"""The shipped night and weekend windows mute an error's page, and that is said on the incident page and
once in the log; no Kubernetes API means no remediation proposal and no fleet size, each said once.
Clocks are injected: the shipped windows are in Europe/Berlin."""
from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from types import SimpleNamespace

from alertd.app.notifiers import build_router
from alertd.app.remediate import RemediationRunner
from alertd.app.reporting import Reporting
from alertd.config.settings import Config
from alertd.notify.decision import muted_notes, route_incident
from alertd.report.settings import ReportSettings
from alertd.web.states import routing_notes
from testkit.builders import T0, engine, shipped_rules, xid

MONDAY_NIGHT = T0 + timedelta(hours=7, minutes=30)  # Monday 20:30 in Berlin: the shipped "nights" window
TUESDAY_MORNING = T0 + timedelta(hours=21)  # Tuesday 10:00 in Berlin: no window


def an_error_at(when, eng=None, gpu="0"):
    changes = (eng or engine()).ingest([xid(79, gpu=gpu)], when)
    inc = changes[0].incident
    inc.severity = "error"  # what the shipped "errors" route, muted at night and on weekends, takes
    return changes, inc


def test_a_page_muted_by_the_shipped_night_window_says_so():
    _, inc = an_error_at(MONDAY_NIGHT)
    notes = routing_notes(Config(), shipped_rules().routing, inc, TUESDAY_MORNING)
    assert any(n.startswith("Page muted by window 'nights' until Tue 08:00 Europe/Berlin (route 'errors' to "
                            "gpu-oncall) when it opened") for n in notes), notes
    assert any("Slack and PagerDuty are not configured" in n for n in notes), notes
    assert not any("is muted now" in n for n in notes), notes


def test_an_unmuted_page_has_no_mute_note():
    _, inc = an_error_at(TUESDAY_MORNING)
    notes = routing_notes(Config(), shipped_rules().routing, inc, TUESDAY_MORNING)
    assert not any("muted" in n for n in notes), notes


def test_the_log_says_once_that_a_new_incident_is_muted(caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    eng = engine()
    changes, inc = an_error_at(MONDAY_NIGHT, eng)
    router = build_router(Config(), shipped_rules())
    router.route(changes, MONDAY_NIGHT)
    later, same = an_error_at(MONDAY_NIGHT + timedelta(seconds=30), eng, gpu="1")  # its second GPU: not again
    assert same.id == inc.id and "opened" not in later[0].kinds
    router.route(later, MONDAY_NIGHT + timedelta(seconds=30))
    said = [r.getMessage() for r in caplog.records if "is not posted or paged" in r.getMessage()]
    assert said == [f"{inc.id} is not posted or paged through route 'errors' to gpu-oncall (window 'nights' until "
                    "Tue 08:00 Europe/Berlin): the console log has it"], said


def test_the_messages_that_do_go_out_say_the_page_is_muted_and_until_when():
    changes, inc = an_error_at(MONDAY_NIGHT)
    items = build_router(Config(), shipped_rules()).route(changes, MONDAY_NIGHT)
    notes = {i.payload.note for i in items if i.intent == "show"}
    assert notes == {"page muted by window 'nights' until Tue 08:00 Europe/Berlin (route 'errors' to gpu-oncall)"}
    day, _ = an_error_at(TUESDAY_MORNING)
    assert {i.payload.note for i in build_router(Config(), shipped_rules()).route(day, TUESDAY_MORNING)} == {""}


def test_a_weekend_window_ends_at_monday_midnight_in_its_own_zone():
    weekends = shipped_rules().routing.windows["weekends"]
    saturday_noon = T0 + timedelta(days=5, hours=-1)  # T0 is Monday 12:00 UTC (13:00 in Berlin)
    assert weekends.contains(saturday_noon)
    assert weekends.until_text(saturday_noon) == "until Mon 00:00 Europe/Berlin"
    nights = shipped_rules().routing.windows["nights"]
    assert nights.until_text(MONDAY_NIGHT) == "until Tue 08:00 Europe/Berlin"
    assert nights.until_text(MONDAY_NIGHT + timedelta(hours=5)) == "until 08:00 Europe/Berlin"


def test_no_kubernetes_means_no_proposal_said_on_the_page_and_once_in_the_log(caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    remediations = RemediationRunner(SimpleNamespace(rules=shipped_rules()), None)  # type: ignore[arg-type]
    changes = engine().ingest([xid(79)], T0)
    why = remediations.why_none(changes[0].incident)
    assert "Policy 'gpu-off-the-bus'" in why and "enrich.kube is not configured" in why
    remediations.submit(changes)
    remediations.submit(engine().ingest([xid(79, node="gpu-node-2")], T0))
    assert len([r for r in caplog.records if r.getMessage().startswith("no remediation proposed")]) == 1


def test_no_kubernetes_means_no_fleet_size_said_once(caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    metrics = SimpleNamespace(add_collector=lambda c: None)
    reporting = Reporting(SimpleNamespace(), ReportSettings(), lambda: T0, kube=None, metrics=metrics)  # type: ignore[arg-type]
    assert "enrich.kube is not configured" in reporting.no_fleet_size
    for _ in range(3):
        asyncio.run(reporting.sample(T0))
    assert len([r for r in caplog.records if r.getMessage().startswith("fleet size not sampled")]) == 1


def test_the_cli_shows_what_the_api_says_of_a_muted_page():
    import io
    from argparse import Namespace

    from alertd.cli.api_client import _show_incident

    _, inc = an_error_at(MONDAY_NIGHT)
    notes = routing_notes(Config(), shipped_rules().routing, inc, TUESDAY_MORNING)
    out = io.StringIO()
    _show_incident({**inc.to_dict(), "routingNotes": [n for n in notes if " muted by " in n]},
                   Namespace(output="text"), out)
    assert "\n  quiet: Page muted by window 'nights' until Tue 08:00 Europe/Berlin (route 'errors'" in out.getvalue()


def test_a_storm_of_errors_pages_at_night_a_lone_error_waits_for_the_morning():
    changes = engine().ingest([xid(119, node=f"gpu-node-{i:02d}") for i in range(60)], MONDAY_NIGHT)
    fleet = next(c.incident for c in changes if c.incident.fleet)
    assert fleet.severity == "error" and len(fleet.nodes) == 60
    routing = shipped_rules().routing
    decision = route_incident(routing, fleet, MONDAY_NIGHT)
    assert "gpu-oncall" in decision.active_receivers and muted_notes(routing, decision) == []  # paged: no "muted"
    lone = engine().ingest([xid(119)], MONDAY_NIGHT)[0].incident
    decision = route_incident(routing, lone, MONDAY_NIGHT)
    assert "gpu-oncall" not in decision.active_receivers and "gpu-alerts" in decision.active_receivers


def test_the_slack_message_of_a_muted_page_says_so():
    from alertd.integrations.slack.render import RenderContext, render_incident, to_text

    changes, inc = an_error_at(MONDAY_NIGHT)
    (note,) = {i.payload.note for i in build_router(Config(), shipped_rules()).route(changes, MONDAY_NIGHT)}
    text = to_text(render_incident(inc, RenderContext(note=note, now=MONDAY_NIGHT))[1])
    assert ":zzz: page muted by window 'nights' until Tue 08:00 Europe/Berlin (route 'errors' to gpu-oncall)" in text
