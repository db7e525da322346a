"""What a storm's GPUs read and how far it reaches (``reading`` and ``escalate`` of its event, rules/storm_says.py).

Each node folding into a fleet adds the GPUs its alerts of the fleet's event name, with the number each alert
carries (a GPU's temperature), to the fleet's ``storm_gpus`` annotation: {node: {gpu: reading or null}}. From
it the fleet says its hottest GPU, the range and the median ("GPU temperature 86-95 °C, median 90 °C, hottest
95 °C on GPU 3 of node-7, over 128 GPUs"), and its severity follows the nodes and GPUs it spans: 128
throttling GPUs in one rack are the rack's cooling, not 128 warnings. Kept only for events that read a value
or escalate, so other storms carry nothing more.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from alertd.core.json_types import JSONObject, JSONValue, as_object
from alertd.core.model import STORM_EXTENT as EXTENT, STORM_SAYS as SAYS, Incident, Signal
from alertd.rules.ruleset import StormEvent
from alertd.rules.storm_says import Escalation, escalated

GPUS = "storm_gpus"  # fleet annotation: {node: {gpu: reading or null}}, the GPUs its event's alerts name


def reading_of(annotations: Mapping[str, str], events: Sequence[StormEvent]) -> float | None:
    """The number an alert carries in the annotation a storm event reads ("91", "90.5"), or None."""
    for event in events:
        raw = annotations.get(event.reading.annotation, "") if event.reading is not None else ""
        if raw:
            try:
                value = float(raw.strip().split()[0])
            except (ValueError, IndexError):
                continue
            if math.isfinite(value):
                return value
    return None


def event_of(events: Sequence[StormEvent], fleet: Incident) -> StormEvent | None:
    """The event the fleet opened for (its key: "fleet|<event>|<by fields>"), when it reads or escalates."""
    name = fleet.key.split("|")[1] if fleet.key.count("|") >= 1 else ""
    event = next((e for e in events if e.name == name), None)
    return event if event is not None and (event.reading is not None or event.escalate) else None


def note_gpus(fleet: Incident, child: Incident, of_event: Callable[[Signal], bool]) -> None:
    """Add the GPUs of ``child``'s alerts of the event, with their latest reading, to the fleet's."""
    if not child.node:
        return
    mine: JSONObject = {}
    for m in child.members.values():
        gpu = m.subject.gpu
        key = (gpu.index or gpu.uuid or gpu.pci_bus_id) if gpu is not None else ""
        if key and not m.response and of_event(m.signal):
            if m.reading is not None or key not in mine:
                mine[key] = m.reading
    if mine:
        gpus = as_object(fleet.annotations.get(GPUS))
        fleet.annotations[GPUS] = {**gpus, child.node: {**as_object(gpus.get(child.node)), **mine}}


def drop_gpus(fleet: Incident, node: str) -> None:
    """A node that leaves the fleet takes its GPUs along."""
    gpus = as_object(fleet.annotations.get(GPUS))
    if node in gpus:
        fleet.annotations[GPUS] = {k: v for k, v in gpus.items() if k != node}


@dataclass(frozen=True, slots=True)
class Readings:
    gpus: int  # GPUs of the event's alerts
    values: tuple[float, ...]  # the readings they carry, sorted
    hottest: tuple[str, str]  # node, GPU of the highest reading

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def readings(fleet: Incident) -> Readings:
    """The fleet's GPUs and readings; the hottest GPU, on a tie the first by node and GPU name. One pass over
    them, no sorting but of the readings: a fleet's every step of a growing storm reads them again."""
    gpus = fleet.annotations.get(GPUS)
    count, values = 0, []
    top: tuple[float, str, str] | None = None
    for node, per_gpu in gpus.items() if isinstance(gpus, dict) else ():
        if not isinstance(per_gpu, dict):
            continue
        count += len(per_gpu)
        for gpu, value in per_gpu.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.append(float(value))
                if top is None or value > top[0] or (value == top[0] and (node, gpu) < top[1:]):
                    top = (float(value), node, gpu)
    values.sort()
    return Readings(count, tuple(values), (top[1], top[2]) if top else ("", ""))


def _num(value: float, unit: str) -> str:
    return f"{value:.0f}{(' ' + unit) if unit else ''}"


def title_part(r: Readings, unit: str) -> str:
    """What the title says of the readings: "86-95 °C, median 90 °C"."""
    lo, hi = r.values[0], r.values[-1]
    span = _num(lo, unit) if lo == hi else f"{lo:.0f}-{_num(hi, unit)}"
    return f"{span}, median {_num(r.median, unit)}"


def speak(fleet: Incident, event: StormEvent, r: Readings) -> None:
    """Keep the fleet's ``storm_says`` current: its readings in the title's words and in a sentence naming the
    hottest GPU, and its event's advice."""
    says: JSONObject = {}
    if event.reading is not None and r.values:
        unit, (node, gpu) = event.reading.unit, r.hottest
        says["title"] = title_part(r, unit)
        says["reading"] = (f"{event.reading.name}: hottest {_num(r.values[-1], unit)} on GPU {gpu} of {node}; "
                           f"{says['title']} over {len(r.values)} of the storm's {r.gpus} GPUs")
    if event.advice:
        says["advice"] = event.advice
    if says:
        fleet.annotations[SAYS] = says
    else:
        fleet.annotations.pop(SAYS, None)


def extent_step(fleet: Incident, steps: tuple[Escalation, ...], r: Readings) -> Escalation | None:
    """The escalate step the fleet's nodes and GPUs reach."""
    return escalated(steps, len(fleet.nodes), r.gpus)


def extent_fact(step: Escalation, nodes: int, gpus: int) -> dict[str, JSONValue]:
    return {"severity": step.severity, "nodes": nodes, "gpus": gpus, "step": step.said()}


def extent_said(fleet: Incident) -> str:
    """Why the fleet is as severe as it is, when its extent made it so ("" otherwise)."""
    fact = as_object(fleet.annotations.get(EXTENT))
    if fact.get("severity") != fleet.severity:
        return ""
    return (f"{fact.get('nodes')} nodes and {fact.get('gpus')} GPUs reach the storm's {fact.get('severity')} "
            f"step ({fact.get('step')})")


__all__ = ["EXTENT", "GPUS", "SAYS", "Readings", "drop_gpus", "event_of", "extent_fact", "extent_said",
           "extent_step", "note_gpus", "reading_of", "readings", "speak", "title_part"]
