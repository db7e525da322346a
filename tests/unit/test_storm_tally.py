"""A fleet's running readings (engine/storm/extent.py, Tally) kept as nodes are noted and leave say what
reading its ``storm_gpus`` annotation afresh says, after every change."""
from __future__ import annotations

import random

from alertd.core.model import Incident
from alertd.engine.storm.extent import GPUS, Readings, Tally, drop_gpus, note_gpus, readings

from testkit.builders import alert, at, engine


def a_fleet() -> Incident:
    return Incident(id="inc-1", key="fleet|thermal|r07", group="r07", title="thermal", severity="warning",
                    category="gpu", status="open", opened_at=at(0), updated_at=at(0), fleet=True)


def fresh(fleet: Incident) -> Readings:
    return readings(fleet)  # no tallies: read from the annotation alone


def child_with(node: str, temps: dict[str, float | None]) -> Incident:
    e = engine()
    alerts = [alert("GPUTemperatureHigh", starts=0, node=node, gpu=gpu, UUID=f"GPU-{node}-{gpu}",
                    annotations={"temperature": "" if t is None else str(t)}) for gpu, t in temps.items()]
    e.ingest(alerts, at(0))
    [inc] = [i for i in e.state.incidents.values() if i.node == node]
    return inc


def test_the_running_readings_match_the_annotation_read_afresh_through_notes_and_drops():
    rng = random.Random(7)
    fleet = a_fleet()
    tallies: dict[str, Tally] = {}
    nodes = [f"n{i}" for i in range(12)]
    children = {n: [child_with(n, {str(g): rng.choice([None, 86.0, 90.0, 95.0, 91.5]) for g in range(rng.randint(1, 4))})
                    for _ in range(2)] for n in nodes}
    assert readings(fleet, tallies) == Readings(0, 0, 0.0, 0.0, 0.0, ("", ""))
    for _ in range(120):
        node = rng.choice(nodes)
        if rng.random() < 0.2:
            drop_gpus(fleet, node, tallies.get(fleet.id))
        else:
            note_gpus(fleet, rng.choice(children[node]), lambda sig: True, tallies.get(fleet.id))
        assert readings(fleet, tallies) == fresh(fleet)
    assert tallies[fleet.id].of is fleet.annotations[GPUS]
    assert fresh(fleet).gpus > fresh(fleet).count > 0


def test_a_replaced_annotation_is_read_afresh_not_from_the_tally_of_the_old_one():
    fleet = a_fleet()
    tallies: dict[str, Tally] = {}
    note_gpus(fleet, child_with("n1", {"0": 90.0}), lambda sig: True, tallies.get(fleet.id))
    assert readings(fleet, tallies).hi == 90.0
    fleet.annotations[GPUS] = {"n2": {"3": 97.0, "4": 97.0}, "n1": {"0": 97.0}}
    assert readings(fleet, tallies) == Readings(3, 3, 97.0, 97.0, 97.0, ("n1", "0"))
