"""What a storm event says beyond its title, and how its severity follows its extent: a storm event's
``reading``, ``advice`` and ``escalate`` (correlation.storm.events, correlation.schema.json), read into the
rules engine/storm/extent.py takes.

A fault that each GPU reports as a warning (a thermal slowdown) is another matter on 128 GPUs of one rack:
the rack's cooling, not a GPU. So the severity a storm of such warnings reaches is data, by the nodes and
GPUs it spans, never code.
"""
from __future__ import annotations

from typing import Annotated, Protocol

from msgspec import Meta

from alertd.core.model import SEVERITY_RANK
from alertd.core.sections import Section
from alertd.core.states import RAISED_SEVERITIES, Severity
from alertd.core.yamlio import Path_


class Reading(Section, frozen=True):
    """A number each alert of the event carries in an annotation (a GPU's temperature): the fleet incident names
    its hottest GPU, range and median, in its title and messages."""

    annotation: Annotated[str, Meta(min_length=1, description=(
        "The alert annotation holding the number, e.g. temperature (deploy/prometheus/gpu-alerts.yml: "
        "GPUTemperatureHigh). Alerts without it, or with no number in it, are left out."))]
    name: Annotated[str, Meta(min_length=1, description="What the number is, in words: GPU temperature. Default value.")] \
        = "value"
    unit: Annotated[str, Meta(description="Its unit as shown after the number: \u00b0C. Default none.")] = ""


class Escalation(Section, frozen=True):
    """The storm is at least ``severity`` once it spans ``nodes`` nodes and ``gpus`` GPUs (both, when given)."""

    severity: Annotated[Severity, Meta(extra_json_schema={"enum": list(RAISED_SEVERITIES)},
                                       description="The severity reached.")]
    nodes: Annotated[int, Meta(ge=1, description="Nodes of the fleet incident at least.")] = 0
    gpus: Annotated[int, Meta(ge=1, description="GPUs whose alerts are of the event at least.")] = 0

    def reached(self, nodes: int, gpus: int) -> bool:
        return nodes >= self.nodes and gpus >= self.gpus

    def said(self) -> str:
        parts = [f"{n} {what}" for n, what in ((self.nodes, "nodes"), (self.gpus, "GPUs")) if n]
        return " and ".join(parts)


class Problems(Protocol):
    def problem(self, path: Path_, message: str) -> None: ...


def parse_escalate(items: tuple[Escalation, ...], path: Path_, check: Problems) -> tuple[Escalation, ...]:
    """The steps, each more severe and no smaller than the one before it (else a problem naming the step)."""
    steps: list[Escalation] = []
    for i, step in enumerate(items):
        if not step.nodes and not step.gpus:
            check.problem(path + (i,), f"escalate step {i + 1} ({step.severity}) names neither nodes nor gpus: "
                                       "say how far the storm must reach")
        if steps:
            before = steps[-1]
            if SEVERITY_RANK.get(step.severity, 0) <= SEVERITY_RANK.get(before.severity, 0):
                check.problem(path + (i, "severity"), f"escalate step {i + 1} ({step.severity}) must be more severe "
                                                      f"than the step before it ({before.severity})")
            if step.nodes < before.nodes or step.gpus < before.gpus:
                check.problem(path + (i,), f"escalate step {i + 1} ({step.said()}) must not be smaller than the "
                                           f"step before it ({before.said()})")
        steps.append(step)
    return tuple(steps)


def escalated(steps: tuple[Escalation, ...], nodes: int, gpus: int) -> Escalation | None:
    """The most severe step the storm's extent reaches, or None."""
    return next((s for s in reversed(steps) if s.reached(nodes, gpus)), None)


__all__ = ["Escalation", "Reading", "escalated", "parse_escalate"]
