"""The history judge (alertd/engine/judge.py) over the shipped rules/history.yml: a GPU's and node's past,
given as a snapshot, and an injected time -> the verdict on a new incident."""
from __future__ import annotations

from datetime import timedelta

import pytest

from alertd.core.model import Incident
from alertd.core.verdict import HistoryVerdict
from alertd.engine.judge import VERDICT_EVENT, apply_verdict, judge, ordinal, short_gpu, window_words
from alertd.store.history_snapshot import Fault, HistorySnapshot, Remediated
from testkit.builders import alert, at, engine, shipped_rules, xid

UUID = "GPU-2f6b1c3d-8e9a-4b7c-a1d2-e3f4a5b69173"
DAY = 86400


def opened(*alerts, when: float = 10 * DAY) -> Incident:
    """The incident the engine opens for ``alerts`` at ``when``."""
    changes = engine().ingest(list(alerts), at(when))
    return changes[0].incident


def xid79(when: float = 10 * DAY, node: str = "node-a", gpu: str = "3"):
    a = xid(79, node=node, gpu=gpu)
    labels = {**a.labels, "UUID": UUID}
    return alert("GPUXidError", starts=when, **{k: v for k, v in labels.items() if k not in ("alertname", "cluster")})


def past_gpu(incident: str, days_ago: float, *xids: int, now: float = 10 * DAY) -> Fault:
    return Fault(incident, at(now - days_ago * DAY), UUID, "node-a", xids, ("xid",), ("GPUXidError",))


def rules():
    return shipped_rules().history


def test_third_xid79_in_7_days_is_a_repeat_offender_with_the_line():
    inc = opened(xid79())
    snap = HistorySnapshot("node-a", (UUID,), (past_gpu("INC-388", 5, 79), past_gpu("INC-412", 2, 79)))
    v = judge(inc, snap, rules(), at(10 * DAY))
    assert v is not None
    assert v.rule == "xid79-third-in-7d" and v.kind == "repeat_offender"
    assert v.action == "replace_gpu" and v.was_action == "reboot_node"
    assert v.line == ("3rd Xid 79 on GPU GPU-…-9173 in 7 days (last: INC-412, INC-388); "
                      "action: replace GPU (was: reboot node)")
    assert v.incidents == ("INC-412", "INC-388")


def test_first_and_second_xid79_get_no_verdict():
    inc = opened(xid79())
    assert judge(inc, HistorySnapshot("node-a", (UUID,)), rules(), at(10 * DAY)) is None
    one = HistorySnapshot("node-a", (UUID,), (past_gpu("INC-412", 2, 79),))
    assert judge(inc, one, rules(), at(10 * DAY)) is None


def test_the_window_follows_the_injected_clock():
    inc = opened(xid79())
    snap = HistorySnapshot("node-a", (UUID,), (past_gpu("INC-388", 8, 79), past_gpu("INC-412", 2, 79)))
    assert judge(inc, snap, rules(), at(10 * DAY)) is None  # INC-388 is 8 days old: outside 7d
    assert judge(inc, snap, rules(), at(9 * DAY)) is not None  # a day earlier it was inside


def test_other_gpus_and_other_xids_do_not_count():
    inc = opened(xid79())
    other = Fault("INC-1", at(9 * DAY), "GPU-other-0000000000000", "node-a", (79,), ("xid",), ())
    snap = HistorySnapshot("node-a", (UUID,), (other, past_gpu("INC-2", 1, 48), past_gpu("INC-3", 1, 79)))
    assert judge(inc, snap, rules(), at(10 * DAY)) is None


def test_five_fatal_xids_in_24h_drain_and_hand_off():
    inc = opened(xid79())
    past = tuple(past_gpu(f"INC-90{i}", 0.1 * i, code) for i, code in enumerate((48, 48, 95, 64), start=1))
    v = judge(inc, HistorySnapshot("node-a", (UUID,), past), rules(), at(10 * DAY))
    assert v is not None and v.rule == "fatal-xid-repeat" and v.action == "drain_and_handoff"
    assert v.line.startswith("5th fatal Xid (Xid 48, Xid 64, Xid 79, Xid 95) on GPU GPU-…-9173 in 24 hours")


def test_the_highest_action_wins():
    inc = opened(xid79())
    past = (past_gpu("INC-901", 0.2, 79), past_gpu("INC-902", 0.3, 79), past_gpu("INC-903", 0.4, 48),
            past_gpu("INC-4", 0.5, 48))
    v = judge(inc, HistorySnapshot("node-a", (UUID,), past), rules(), at(10 * DAY))
    assert v is not None and v.action == "replace_gpu"  # the fatal-Xid rule matches too, one step lower


def node_past(incident: str, repaired_days_ago: float, *xids: int, repair: str = "uncordon") -> Fault:
    return Fault(incident, at(10 * DAY - repaired_days_ago * DAY - 3600), "", "node-a", xids, ("xid",),
                 ("GPUXidError",), at(10 * DAY - repaired_days_ago * DAY), repair)


def test_the_same_fault_back_after_the_uncordon_means_the_repair_did_not_hold():
    inc = opened(xid79())
    v = judge(inc, HistorySnapshot("node-a", (UUID,), (node_past("INC-7", 0.25, 79),)), rules(), at(10 * DAY))
    assert v is not None and v.kind == "repair_not_held" and v.action == "drain_and_handoff"
    assert v.line == ("Xid 79 back on node node-a 6 hours after the uncordon of INC-7: the repair did not hold; "
                      "action: drain and hand off (was: reboot node)")
    assert v.severity == ""  # already critical


def test_another_fault_or_a_late_return_is_not_a_failed_repair():
    inc = opened(xid79())
    assert judge(inc, HistorySnapshot("node-a", (), (node_past("INC-7", 0.25, 48),)), rules(), at(10 * DAY)) is None
    assert judge(inc, HistorySnapshot("node-a", (), (node_past("INC-7", 8, 79),)), rules(), at(10 * DAY)) is None


def test_an_exporter_that_hangs_again_or_an_application_xid_is_no_failed_repair():
    """Only hardware faults make a repair fail: a dcgm-exporter down again days after the node's GPU was
    repaired (its series vanished then too), or a second Xid 13, asks for no hardware inspection."""
    down = opened(alert("DCGMExporterDown", node="node-a", starts=10 * DAY))
    missing = Fault("INC-7", at(10 * DAY - 5 * DAY - 3600), "", "node-a", (79,), ("xid", "metrics_missing"),
                    ("GPUXidError", "GPUCountDropped"), at(10 * DAY - 5 * DAY), "uncordon")
    assert judge(down, HistorySnapshot("node-a", (), (missing,)), rules(), at(10 * DAY)) is None
    app = opened(xid(13, node="node-a", gpu="3"))
    assert judge(app, HistorySnapshot("node-a", (), (node_past("INC-8", 0.25, 13),)), rules(), at(10 * DAY)) is None


def test_five_remediations_in_7_days_make_a_lemon_node():
    inc = opened(xid(62, node="node-a"))
    rem = tuple(Remediated(f"INC-{i}", "node-a", "drain-gpu", at(10 * DAY - i * DAY)) for i in range(5))
    v = judge(inc, HistorySnapshot("node-a", (), (), rem), rules(), at(10 * DAY))
    assert v is not None and v.kind == "lemon_node" and "contact support" in v.line
    assert judge(inc, HistorySnapshot("node-a", (), (), rem[:4]), rules(), at(10 * DAY)) is None


def test_apply_keeps_a_verdict_raises_severity_and_never_climbs_down():
    inc = opened(alert("GPUThermal", node="node-a", gpu="0", UUID=UUID))
    low = HistoryVerdict("r1", "repeat_offender", "line 1", "reset_gpu", severity="critical")
    assert apply_verdict(inc, low, at(10 * DAY))
    assert inc.severity == "critical" and inc.timeline[-1].kind == VERDICT_EVENT
    assert not apply_verdict(inc, HistoryVerdict("r2", "lemon_node", "line 2", "reboot_node"), at(10 * DAY))
    assert inc.verdict == low
    assert not apply_verdict(inc, None, at(10 * DAY))


def test_verdict_is_a_typed_field_of_the_stored_incident():
    inc = opened(xid79())
    v = HistoryVerdict("xid79-third-in-7d", "repeat_offender", "3rd ...", "replace_gpu", "reboot_node", "critical",
                       ("INC-2", "INC-1"), UUID)
    inc.verdict = v
    doc = inc.to_dict()
    assert doc["verdict"]["action"] == "replace_gpu" and "verdict" not in doc["annotations"]
    assert Incident.from_dict(doc).verdict == v
    assert HistoryVerdict.from_json(v.to_json()) == v


@pytest.mark.parametrize(("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (22, "22nd")])
def test_ordinal(n, text):
    assert ordinal(n) == text


def test_words():
    assert window_words(timedelta(days=7)) == "7 days" and window_words(timedelta(hours=24)) == "24 hours"
    assert short_gpu(UUID) == "GPU-…-9173"


def test_bad_history_rules_are_reported_with_their_line(tmp_path):
    from alertd.authoring.check import check

    f = tmp_path / "history.yml"
    f.write_text("history:\n  - name: a\n    kind: lemon_node\n    any_of: [{xid: 79}]\n    action: replace_gpu\n"
                 "  - name: b\n    kind: repeat_offender\n    any_of: [{xid: 79}]\n    action: fix_it\n")
    messages = [(p.line, p.message) for p in check([f]).errors]
    assert any(line == 2 for line, _ in messages), messages  # lemon_node counts remediations: no any_of
    assert any(line == 9 and "fix_it" in m for line, m in messages), messages  # not a ladder action
    f.write_text("history:\n  - name: a\n    kind: repeat_offender\n    any_of: [{xid: 79}]\n    action: reset_gpu\n"
                 "  - name: a\n    kind: repair_not_held\n    within: 3 days\n    action: reset_gpu\n")
    messages = [(p.line, p.message) for p in check([f]).errors]
    assert any(line == 6 and "duplicate history rule name 'a'" in m for line, m in messages), messages
    assert any(line == 8 for line, _ in messages), messages  # not a Prometheus duration


def test_a_step_reads_the_past_only_of_incidents_with_a_fault():
    """An incident the judge would turn away (a non-GPU alert on the node: no fault) costs no store read."""
    import asyncio

    from alertd.app.verdicts import Verdicts

    reads: list[str] = []

    class Source:
        async def history_snapshot(self, gpus, node, since, exclude=""):
            reads.append(exclude)
            return HistorySnapshot(node, tuple(gpus))

    changes = engine().ingest([xid79(), alert("NodeFilesystemAlmostFull", node="node-b", starts=10 * DAY)],
                              at(10 * DAY))
    assert sorted(c.incident.node for c in changes) == ["node-a", "node-b"]
    found = asyncio.run(Verdicts(Source(), rules).judge_step(changes, at(10 * DAY)))
    faulty = [c.incident.id for c in changes if "xid" in c.incident.signals]
    assert found == 0 and reads == faulty
