"""An overheating rack: its thermal storm names the rack, its temperatures and what to do, and its severity
follows its extent (rules/correlation.yml, storm event ``thermal``). The pure engine on a virtual clock, fed
alerts in the shapes deploy/prometheus/gpu-alerts.yml gives them (labels and annotation templates)."""
from __future__ import annotations

import statistics

from alertd.core.model import STORM_SAYS, Incident
from alertd.engine.pipeline import Engine
from alertd.engine.storm import EXTENT, GPUS

from testkit.builders import engine
from testkit.thermal import hot_node, rack_temps, shipped


def feed(e: Engine, nodes: list[str], first: float = 0, step: float = 0.5, gpus: int = 8) -> list:
    changes = []
    for i, node in enumerate(nodes):
        t = first + i * step
        changes += e.ingest(hot_node(node, rack_temps(i, gpus)), _at(t))
        changes += e.tick(_at(t))
    return changes


def _at(t: float):
    from testkit.builders import at
    return at(t)


def the_fleet(e: Engine) -> Incident:
    [fleet] = [i for i in e.state.incidents.values() if i.fleet]
    return fleet


def test_the_shipped_temperature_rule_carries_the_temperature_as_a_number():
    a = shipped("GPUTemperatureHigh", "n1", 0, 91.5)
    assert a.annotations["temperature"] == "91.5"


def test_a_rack_of_throttling_gpus_names_its_rack_temperatures_and_advice_and_is_an_error():
    e = engine()
    nodes = [f"gpu-r07-n{i:02d}" for i in range(16)]
    feed(e, nodes)
    fleet = the_fleet(e)
    temps = [t for i in range(16) for t in rack_temps(i)]
    lo, hi, med = min(temps), max(temps), statistics.median(temps)
    assert sorted(fleet.nodes) == nodes
    assert "on 16 nodes of rack r07 in prod" in fleet.title, fleet.title
    assert f"({lo:.0f}-{hi:.0f} °C, median {med:.0f} °C" in fleet.title, fleet.title
    says = fleet.annotations[STORM_SAYS]
    assert isinstance(says, dict)
    hottest = next(f"GPU {g} of {nodes[i]}" for i in range(16) for g, t in enumerate(rack_temps(i)) if t == hi)
    assert says["reading"] == (f"GPU temperature: hottest {hi:.0f} °C on {hottest}; {lo:.0f}-{hi:.0f} °C, "
                               f"median {med:.0f} °C over 128 of the storm's 128 GPUs")
    assert "CDU" in str(says["advice"]) and "inlet" in str(says["advice"])
    assert fleet.severity == "error"  # 16 nodes and 128 GPUs reach the error step (5 nodes, 32 GPUs)
    assert fleet.annotations[EXTENT] == {"severity": "error", "nodes": 16, "gpus": 128, "step": "5 nodes and 32 GPUs"}


def test_a_small_thermal_storm_stays_a_warning():
    e = engine()
    feed(e, [f"gpu-r07-n{i:02d}" for i in range(6)], gpus=3)  # 6 nodes, 18 GPUs: fewer GPUs than the error step
    fleet = the_fleet(e)
    assert fleet.severity == "warning" and EXTENT not in fleet.annotations
    assert "median" in fleet.title


def test_a_growing_thermal_storm_rises_to_error_once_and_says_why():
    e = engine()
    nodes = [f"gpu-r07-n{i:02d}" for i in range(10)]
    changes = feed(e, nodes[:5], gpus=4)  # 20 GPUs
    assert the_fleet(e).severity == "warning"
    changes = feed(e, nodes[5:], first=60, gpus=4)
    fleet = the_fleet(e)
    assert fleet.severity == "error"
    rises = [ev for c in changes if c.incident is fleet for ev in c.events if ev.kind == "severity_changed"]
    assert [ev.text for ev in rises] == [
        "warning -> error: 8 nodes and 32 GPUs reach the storm's error step (5 nodes and 32 GPUs)"]


def test_a_hotter_reading_of_a_firing_alert_moves_the_storms_temperatures():
    e = engine()
    nodes = [f"gpu-r07-n{i:02d}" for i in range(6)]
    feed(e, nodes)
    hotter = shipped("GPUTemperatureHigh", nodes[2], 5, 99)
    e.ingest([hotter], _at(120))
    e.tick(_at(120))
    fleet = the_fleet(e)
    assert "hottest 99 °C on GPU 5 of gpu-r07-n02" in str(as_dict(fleet.annotations[STORM_SAYS])["reading"])
    assert "-99 °C" in fleet.title


def test_gpus_without_a_reading_still_count_and_nodes_that_leave_are_taken_off():
    e = engine()
    nodes = [f"n{i}" for i in range(8)]
    for i, node in enumerate(nodes):  # throttling only: no temperature alert yet
        e.ingest([shipped("GPUClockEventThrottling", node, g, 64, clock_event_reasons="64") for g in range(4)],
                 _at(i * 0.5))
        e.tick(_at(i * 0.5))
    fleet = the_fleet(e)
    gpus = fleet.annotations[GPUS]
    assert isinstance(gpus, dict) and sum(len(as_dict(v)) for v in gpus.values()) == 32
    assert fleet.severity == "error"  # 8 nodes and 32 GPUs: the error step (5 nodes and 32 GPUs)
    assert STORM_SAYS in fleet.annotations and "reading" not in as_dict(fleet.annotations[STORM_SAYS])
    assert "median" not in fleet.title


def test_other_storms_say_nothing_more():
    from testkit.builders import xid
    e = engine()
    for i in range(12):
        e.ingest([xid(79, node=f"n{i}", gpu=str(g)) for g in range(8)], _at(i * 0.5))
        e.tick(_at(i * 0.5))
    fleet = the_fleet(e)
    assert not {GPUS, EXTENT, STORM_SAYS} & set(fleet.annotations)
    assert fleet.severity == "critical"


def as_dict(value: object) -> dict:
    assert isinstance(value, dict)
    return value


def storm_rules(tmp_path, escalate: str) -> str:
    """The problems ``alertd check`` reports for a correlation file whose thermal event escalates so."""
    from alertd.core.errors import InvalidDocument
    from alertd.rules.ruleset import load_rules
    path = tmp_path / "correlation.yml"
    path.write_text("correlation:\n  storm:\n    events:\n      - name: thermal\n        match: ['signal=\"thermal\"']\n"
                    f"        by: [cluster]\n        escalate:\n{escalate}")
    try:
        load_rules([path])
    except InvalidDocument as exc:
        return str(exc)
    return ""


def test_escalate_steps_are_checked_with_errors_naming_the_step(tmp_path):
    assert storm_rules(tmp_path, "          - {severity: error, nodes: 5, gpus: 32}\n") == ""
    lower = storm_rules(tmp_path, "          - {severity: critical, nodes: 8}\n          - {severity: error, nodes: 16}\n")
    assert "escalate step 2 (error) must be more severe than the step before it (critical)" in lower
    assert "line 9" in lower or ":9:" in lower, lower
    smaller = storm_rules(tmp_path, "          - {severity: error, nodes: 8, gpus: 64}\n"
                                    "          - {severity: critical, nodes: 16, gpus: 32}\n")
    assert "escalate step 2 (16 nodes and 32 GPUs) must not be smaller than the step before it (8 nodes and 64 GPUs)" \
        in smaller
    assert "nodes" in storm_rules(tmp_path, "          - {severity: error}\n")  # a step needs nodes or GPUs
    assert "severity" in storm_rules(tmp_path, "          - {severity: page, nodes: 3}\n")


def test_the_slack_message_of_a_hot_rack_says_its_temperatures_and_what_to_do():
    from alertd.integrations.slack import render as R
    from testkit.slack_blocks import validate_blocks
    from tests.unit.test_slack_render import texts
    e = engine()
    feed(e, [f"gpu-r07-n{i:02d}" for i in range(16)])
    fleet = the_fleet(e)
    fallback, blocks = R.render_incident(fleet, R.RenderContext(now=_at(60)))
    validate_blocks(blocks)
    shown = texts(blocks)
    assert blocks[0]["text"]["text"].startswith("ERROR: ") and "rack r07" in blocks[0]["text"]["text"]
    assert "86-95 °C, median 90 °C" in fallback
    assert "*Readings*\nGPU temperature: hottest 95 °C on GPU 1 of gpu-r07-n01; 86-95 °C, median 90 °C over 128" \
        in shown, shown
    assert "*Advice*\nCheck the cooling these nodes share" in shown and "drain the hottest nodes" in shown


def test_cordoning_the_hot_nodes_leaves_the_storm_as_severe_as_its_extent():
    from alertd.notify.decision import route_incident
    from testkit.builders import shipped_rules
    e = engine()
    feed(e, [f"gpu-r07-n{i:02d}" for i in range(8)])
    fleet = the_fleet(e)
    routing = shipped_rules().routing
    # every node drained after its fault: what is not the repair is the nodes' own warning
    decision = route_incident(routing, fleet, _at(600), children=[("warning", "warning")] * 8)
    assert decision.severity == "error" and {h.route for h in decision.hits} >= {"error-storms"}
    fleet.annotations.pop(EXTENT)  # without the extent, the repair leaves the nodes' warning
    assert route_incident(routing, fleet, _at(600), children=[("warning", "warning")] * 8).severity == "warning"


def test_a_members_reading_is_stored_with_it():
    from alertd.core.model import Member
    e = engine()
    feed(e, ["n0"])
    [inc] = e.state.incidents.values()
    readings = {m.fingerprint: m.reading for m in inc.members.values()}
    assert sorted(r for r in readings.values() if r is not None) == sorted(rack_temps(0))
    assert {m.fingerprint: Member.from_dict(m.to_dict()).reading for m in inc.members.values()} == readings
