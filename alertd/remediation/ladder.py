"""The action ladder: reboot -> reset -> drain and hand off -> RMA, as data (rules/remediation.yml ``ladder``).

Pure. An incident's Xid catalog action (its primary signal's ``action``) stands on a rung when a step lists
it in ``catalog``; an escalation (what the incident's history says it needs, e.g. "3rd Xid 79 on this GPU in
7 days: replace it") names a rung by its step. The escalation may only climb: a verdict at or below the
catalog's rung changes nothing, so a first fault keeps the policy it always had. The chosen step is
proposed like any policy, under the same approval, circuit breaker and dry-run guards (decide.propose).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from alertd.rules.remediation import LadderStep


class Escalation(Protocol):
    """What the incident's history says it needs: ``action`` (a ladder step name: reboot_node, reset_gpu,
    drain_and_handoff, replace_gpu) and ``line`` (one line: why)."""

    @property
    def action(self) -> str: ...

    @property
    def line(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LadderChoice:
    """The step chosen, whether an escalation climbed to it (above the catalog's rung), and why."""

    step: LadderStep
    escalated: bool
    why: str


def rung(ladder: Sequence[LadderStep], name: str, *, catalog: bool) -> int | None:
    """The index of the step named ``name`` (``catalog``: the step whose catalog list holds it)."""
    for i, step in enumerate(ladder):
        if (name in step.catalog) if catalog else step.step == name:
            return i
    return None


def pick_step(ladder: Sequence[LadderStep], catalog_action: str,
              escalation: Escalation | None = None) -> LadderChoice | None:
    """The ladder step for an incident: the escalation's when it names a rung above the catalog action's,
    else the catalog action's own rung; None when neither stands on the ladder."""
    base = rung(ladder, catalog_action, catalog=True) if catalog_action else None
    up = rung(ladder, escalation.action, catalog=False) if escalation is not None else None
    if escalation is not None and up is not None and (base is None or up > base):
        was = f" (was: {ladder[base].step})" if base is not None else ""
        return LadderChoice(ladder[up], True, (escalation.line or f"escalated to {ladder[up].step}") + was)
    if base is not None:
        return LadderChoice(ladder[base], False, f"Xid catalog action {catalog_action}")
    return None


__all__ = ["Escalation", "LadderChoice", "pick_step", "rung"]
