"""What a storm's GPUs read and how far it reaches (``reading`` and ``escalate`` of its event, rules/storm_says.py).

Each node folding into a fleet adds the GPUs its alerts of the fleet's event name, with the number each alert
carries (a GPU's temperature), to the fleet's ``storm_gpus`` annotation: {node: {gpu: reading or null}}. From
it the fleet says its hottest GPU, the range and the median ("GPU temperature 86-95 °C, median 90 °C, hottest
95 °C on GPU 3 of node-7, over 128 GPUs"), and its severity follows the nodes and GPUs it spans: 128
throttling GPUs in one rack are the rack's cooling, not 128 warnings. Kept only for events that read a value
or escalate, so other storms carry nothing more.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence, cast

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


def note_gpus(fleet: Incident, child: Incident, of_event: Callable[[Signal], bool],
              tally: Tally | None = None) -> None:
    """Add the GPUs of ``child``'s alerts of the event, with their latest reading, to the fleet's: in place, as
    a growing storm notes a node each step (only the engine holds the annotation, and each step's commit writes
    the fleet whole); ``tally``, the fleet's running figures, follows."""
    if not child.node:
        return
    mine: JSONObject = {}
    for m in child.members.values():
        gpu = m.subject.gpu
        key = (gpu.index or gpu.uuid or gpu.pci_bus_id) if gpu is not None else ""
        if key and not m.response and of_event(m.signal):
            if m.reading is not None or key not in mine:
                mine[key] = m.reading
    if not mine:
        return
    gpus = fleet.annotations.get(GPUS)
    if not isinstance(gpus, dict):
        gpus = fleet.annotations[GPUS] = {}
    node = gpus.get(child.node)
    if not isinstance(node, dict):
        node = gpus[child.node] = {}
    if tally is not None and tally.of is gpus:
        for name, value in mine.items():
            tally.put(child.node, name, node.get(name, _ABSENT), value)
    node.update(mine)


def drop_gpus(fleet: Incident, node: str, tally: Tally | None = None) -> None:
    """A node that leaves the fleet takes its GPUs along."""
    gpus = fleet.annotations.get(GPUS)
    if isinstance(gpus, dict) and node in gpus:
        gone = gpus.pop(node)
        if tally is not None and tally.of is gpus and isinstance(gone, dict):
            for gpu, value in gone.items():
                tally.put(node, gpu, value, _ABSENT)


@dataclass(frozen=True, slots=True)
class Readings:
    gpus: int  # GPUs of the event's alerts
    count: int  # the readings they carry
    lo: float  # the lowest and highest of them, and their median (0 with none)
    hi: float
    median: float
    hottest: tuple[str, str]  # node, GPU of the highest reading


_ABSENT = object()  # a GPU not (or no longer) in the annotation


class Tally:
    """A fleet's readings kept as its ``storm_gpus`` annotation (``of``) changes: the GPU count and each
    reading with its node and GPU, sorted. A storm growing a node per step would otherwise read all its GPUs
    again each step, quadratic in its size."""

    def __init__(self, of: JSONObject):
        self.of = of
        self.gpus = 0
        self.sorted: list[tuple[float, str, str]] = []  # (reading, node, GPU)
        for node, per_gpu in of.items():
            if isinstance(per_gpu, dict):
                for gpu, value in per_gpu.items():
                    self.put(node, gpu, _ABSENT, value)

    def put(self, node: str, gpu: str, was: object, now: object) -> None:
        """GPU ``gpu`` of ``node`` read ``was`` and reads ``now`` (``_ABSENT``: not noted)."""
        self.gpus += (was is _ABSENT) - (now is _ABSENT)
        if _number(was):
            del self.sorted[bisect.bisect_left(self.sorted, (float(cast(float, was)), node, gpu))]
        if _number(now):
            bisect.insort(self.sorted, (float(cast(float, now)), node, gpu))

    def readings(self) -> Readings:
        """The hottest GPU: the highest reading, on a tie the first by node and GPU name."""
        entries, n = self.sorted, len(self.sorted)
        if not n:
            return Readings(self.gpus, 0, 0.0, 0.0, 0.0, ("", ""))
        mid = entries[n // 2][0] if n % 2 else (entries[n // 2 - 1][0] + entries[n // 2][0]) / 2  # statistics.median's
        _, node, gpu = entries[bisect.bisect_left(entries, (entries[-1][0],))]
        return Readings(self.gpus, n, entries[0][0], entries[-1][0], mid, (node, gpu))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def readings(fleet: Incident, tallies: dict[str, Tally] | None = None) -> Readings:
    """The fleet's GPUs and readings, from its running tally in ``tallies`` (kept by note_gpus and drop_gpus),
    made from the annotation when there is none or the annotation is another object (loaded, replaced)."""
    gpus = fleet.annotations.get(GPUS)
    if not isinstance(gpus, dict):
        return Tally({}).readings()
    tally = tallies.get(fleet.id) if tallies is not None else None
    if tally is None or tally.of is not gpus:
        tally = Tally(gpus)
        if tallies is not None:
            tallies[fleet.id] = tally
    return tally.readings()


def _num(value: float, unit: str) -> str:
    return f"{value:.0f}{(' ' + unit) if unit else ''}"


def title_part(r: Readings, unit: str) -> str:
    """What the title says of the readings: "86-95 °C, median 90 °C"."""
    lo, hi = r.lo, r.hi
    span = _num(lo, unit) if lo == hi else f"{lo:.0f}-{_num(hi, unit)}"
    return f"{span}, median {_num(r.median, unit)}"


def speak(fleet: Incident, event: StormEvent, r: Readings) -> None:
    """Keep the fleet's ``storm_says`` current: its readings in the title's words and in a sentence naming the
    hottest GPU, and its event's advice."""
    says: JSONObject = {}
    if event.reading is not None and r.count:
        unit, (node, gpu) = event.reading.unit, r.hottest
        says["title"] = title_part(r, unit)
        says["reading"] = (f"{event.reading.name}: hottest {_num(r.hi, unit)} on GPU {gpu} of {node}; "
                           f"{says['title']} over {r.count} of the storm's {r.gpus} GPUs")
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


__all__ = ["EXTENT", "GPUS", "SAYS", "Readings", "Tally", "drop_gpus", "event_of", "extent_fact", "extent_said",
           "extent_step", "note_gpus", "reading_of", "readings", "speak", "title_part"]
