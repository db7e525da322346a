"""Numbers that hold: no negative time to repair, no count capped without saying so, one action everywhere."""
from __future__ import annotations

from datetime import timedelta

from alertd.core.model import iso
from alertd.report.compute import _mttr
from alertd.report.facts import fact, last_end
from testkit.builders import at, engine, resolved, xid


def test_alerts_that_reach_alertd_after_they_ended_give_no_negative_time_to_repair():
    eng = engine()
    late = xid(79, starts=-5 * 3600)  # Alertmanager delivers, after an outage, a fault that began 5 h ago ...
    inc = eng.ingest([late], at(0))[0].incident
    eng.ingest([resolved(late, -3600)], at(60))  # ... and that ended an hour before alertd heard of it
    eng.tick(at(3600))
    assert inc.resolved_at is not None and inc.opened_at == at(0)
    ended = last_end(inc)
    assert ended == iso(at(4 * 3600))  # as long as its alerts lasted (4 h), from the opening
    m = _mttr([fact({**inc.to_dict(), "primary": inc.primary.to_dict()}, ended=ended)])
    assert m["median"] == 4 * 3600.0 and m["repairs"] == 1
    older = fact(inc.to_dict(), ended=iso(at(-3600)))  # a fact stored before: clamped, never below zero
    assert _mttr([older])["median"] == 0.0


def test_a_fault_that_ended_after_the_opening_keeps_its_own_end():
    eng = engine()
    a = xid(79, starts=-60)
    inc = eng.ingest([a], at(0))[0].incident
    eng.ingest([resolved(a, 1800)], at(1800))
    eng.tick(at(3 * 3600))
    assert last_end(inc) == iso(at(1800)) and inc.opened_at + timedelta(minutes=30) == at(1800)


def test_the_cli_shows_the_action_the_page_shows():
    import io
    from argparse import Namespace

    from alertd.cli.api_client import _show_incident
    from alertd.core.verdict import HistoryVerdict
    from alertd.integrations.presentation import incident_action

    inc = engine().ingest([xid(79)], at(0))[0].incident
    inc.verdict = HistoryVerdict(rule="xid79-repeat", kind="repeat_offender", action="replace_gpu",
                                 was_action="reboot_node", incidents=("INC-412", "INC-388"),
                                 line="3rd Xid 79 on GPU GPU-gpu-node-1-0 in 7 days (last: INC-412, INC-388)")
    out = io.StringIO()
    _show_incident(inc.to_dict(), Namespace(output="text"), out)
    text = out.getvalue()
    assert incident_action(inc) == "replace_gpu" and "  action: replace_gpu  runbook: " in text
    assert "reboot_node  runbook" not in text and "(the catalog's action: reboot_node)" in text
