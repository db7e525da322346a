"""The action ladder (rules/remediation.yml ``ladder``): which step an incident proposes, from its Xid catalog
action and what its history says it needs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from alertd.core.errors import InvalidDocument
from alertd.core.verdict import HistoryVerdict
from alertd.remediation import decide
from alertd.remediation.ladder import pick_step
from alertd.rules.remediation import LadderStep, Policy, RemediationPolicy
from alertd.rules.ruleset import load_rules
from testkit.builders import at, engine, xid

ROOT = Path(__file__).resolve().parents[2]
LADDER = (LadderStep("reboot_node", Policy("ladder-reboot_node", "drain-gpu"), frozenset({"reboot_node"})),
          LadderStep("reset_gpu", Policy("ladder-reset_gpu", "drain-gpu"), frozenset({"reset_gpu"})),
          LadderStep("drain_and_handoff", Policy("ladder-drain_and_handoff", "drain-handoff",
                                                 labels={"example.com/service": "true"}), frozenset({"contact_support"})),
          LadderStep("replace_gpu", Policy("ladder-replace_gpu", "rma")))


@dataclass(frozen=True)
class Verdict:
    """A history verdict as the engine gives one: the step it asks for and why, in one line."""

    action: str
    line: str


REPLACE = Verdict("replace_gpu", "3rd Xid 79 on GPU GPU-5fd2-9173 in 7 days (last: INC-412, INC-388)")


def test_without_an_escalation_the_catalog_action_keeps_its_rung() -> None:
    choice = pick_step(LADDER, "reboot_node")
    assert choice is not None and choice.step.step == "reboot_node" and not choice.escalated
    assert pick_step(LADDER, "restart_app") is None  # an application Xid stands on no rung


def test_an_escalation_climbs_and_says_why_and_from_where() -> None:
    choice = pick_step(LADDER, "reboot_node", REPLACE)
    assert choice is not None and choice.escalated and choice.step.action == "rma"
    assert choice.why == REPLACE.line + " (was: reboot_node)"
    handoff = pick_step(LADDER, "reset_gpu", Verdict("drain_and_handoff", "repair did not hold"))
    assert handoff is not None and handoff.escalated and handoff.step.action == "drain-handoff"


@pytest.mark.parametrize("asked", ["reboot_node", "reset_gpu", "not_a_step"])
def test_an_escalation_never_climbs_down_nor_to_a_step_the_ladder_lacks(asked: str) -> None:
    choice = pick_step(LADDER, "reset_gpu", Verdict(asked, "why"))
    assert choice is not None and choice.step.step == "reset_gpu" and not choice.escalated


def test_an_escalation_chooses_alone_when_the_catalog_action_is_off_the_ladder() -> None:
    choice = pick_step(LADDER, "restart_app", Verdict("reset_gpu", "2nd Xid 13 in an hour"))
    assert choice is not None and choice.escalated and choice.step.step == "reset_gpu"
    assert choice.why == "2nd Xid 13 in an hour"


def test_the_shipped_ladder_turns_a_replace_verdict_into_the_rma_step() -> None:
    policy = load_rules([ROOT / "rules"]).remediation
    assert [s.step for s in policy.ladder] == ["reboot_node", "reset_gpu", "drain_and_handoff", "replace_gpu"]
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    first = decide.policy_for(inc, policy)
    assert first is not None and (first.name, first.action) == ("gpu-off-the-bus", "drain-gpu")
    same = decide.policy_for(inc, policy, Verdict("reboot_node", "1st Xid 79"))
    assert same == first  # a verdict at the catalog's own rung changes nothing
    rma = decide.policy_for(inc, policy, REPLACE)
    assert rma is not None and (rma.name, rma.action, rma.automatic) == ("ladder-replace_gpu", "rma", False)


def test_bad_ladders_are_reported_with_their_position(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text(
        "remediation:\n  ladder:\n    - {step: reset_gpu, action: drain-gpu}\n"
        "    - {step: reboot_node, action: drain-gpu}\n"
        "    - {step: drain_and_handoff, action: drain-handoff}\n"
        "    - {step: replace_gpu, action: rma, approval: automatic}\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path / "r.yml"])
    text = str(exc.value)
    assert "r.yml:4" in text and "comes after 'reset_gpu'" in text
    assert "drain-handoff needs handoff.labels" in text
    assert "r.yml:6" in text and "rma always needs a person's approval" in text


def test_an_unknown_step_is_refused_by_the_schema(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text("remediation:\n  ladder:\n    - {step: pray, action: rma}\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path / "r.yml"])
    assert "r.yml:3" in str(exc.value) and "pray" in str(exc.value)


def test_the_incident_history_verdict_is_what_the_proposal_climbs_with() -> None:
    """The engine's verdict on the incident (alertd/engine/judge.py) reaches the ladder through the proposal's
    hook: a third Xid 79 on the GPU proposes the RMA step, a first one the catalog's."""
    policy = load_rules([ROOT / "rules"]).remediation
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    assert decide.escalation_of(inc) is None
    inc.verdict = HistoryVerdict(rule="xid79-repeat", kind="repeat_offender", line=REPLACE.line,
                                 action="replace_gpu", was_action="reboot_node")
    rma = decide.policy_for(inc, policy, decide.escalation_of(inc))
    assert rma is not None and rma.action == "rma" and not rma.automatic


def test_a_ladder_without_policies_still_proposes() -> None:
    """A site may ship only the ladder: the runner proposes as long as a verdict can climb to a step."""
    ladder_only = RemediationPolicy(ladder=LADDER)
    assert ladder_only.proposes and not RemediationPolicy().proposes
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    rma = decide.policy_for(inc, ladder_only, REPLACE)
    assert rma is not None and rma.action == "rma"
