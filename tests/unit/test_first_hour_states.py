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
from alertd.report.settings import ReportSettings
from alertd.web.states import routing_notes
from tests.unit.builders import T0, engine, shipped_rules, xid

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
    assert any("Route 'errors' to gpu-oncall was muted when it opened (mute window 'nights'" in n for n in notes), notes
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
    assert said == [f"{inc.id} is not posted or paged through route 'errors' to gpu-oncall (mute window 'nights'): "
                    "the console log has it"], said


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
