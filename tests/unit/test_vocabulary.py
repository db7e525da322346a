"""The vocabulary (alertd/core/vocabulary.py) is the one list of signal kinds and details: every JSON Schema
enum that names them equals one of its sets, and every kind passes `alertd check`, the schemas and the matchers."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from alertd.authoring.check import check
from alertd.authoring.storm_check import storm_warnings
from alertd.core import vocabulary as v
from alertd.core.json_types import JSONObject
from alertd.core.matchers import match_all, parse_matchers
from alertd.core.model import FIRING, Alert, Signal
from alertd.engine.grouping import fields_of
from alertd.schemas import validator

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "alertd" / "schemas"
KINDS = sorted(v.SignalKind)

# Every enum of a shipped schema that names a signal kind, by schema and path, and the set it lists
ENUMS: dict[tuple[str, str], frozenset[str]] = {
    ("signals", "$defs/rule/properties/kind"): v.RULED_KINDS,
    ("evidence", "$defs/expression/properties/kind"): v.EVIDENCE_KINDS,
    ("evidence", "$defs/alertname/properties/kind"): v.EVIDENCE_KINDS,
    ("evidence", "$defs/labels/properties/kind"): v.EVIDENCE_KINDS,
    ("history", "$defs/condition/properties/signal"): v.HISTORY_KINDS,
    ("rma", "$defs/condition/properties/signal"): v.HISTORY_KINDS,
    ("remediation", "$defs/policy/properties/signals/items"): v.REMEDIATION_KINDS,
    ("correlation", "properties/correlation/properties/job/properties/suspects/properties/kinds/items"):
        v.SUSPECT_CHOICES,
    ("cloudevent-gpu-health", "properties/kind"): v.HEALTH_EVENT_KINDS,
    ("signals", "$defs/rule/allOf/0/then/properties/detail"): v.MISSING_DETAILS,
    ("evidence", "$defs/needs_detail/then/properties/detail"): v.EVIDENCE_MISSING_DETAILS,
    ("history", "$defs/rule/properties/kind"): frozenset(v.VerdictKind),
    ("history", "$defs/rule/properties/action"): frozenset(v.LADDER),
    ("remediation", "$defs/step/properties/step"): frozenset(v.LADDER),
    ("ruletest", "$defs/incident/properties/verdict_action"): frozenset({"", *v.LADDER}),
    ("remediation", "$defs/step/properties/catalog/items"): v.CATALOG_ACTIONS,
    ("xid-catalog", "$defs/entry/properties/action"): v.CATALOG_ACTIONS,
    ("xid-catalog", "$defs/entry/allOf/1/if/properties/action"): v.DRAINED_ACTIONS,
    ("xid-catalog", "$defs/entry/allOf/2/if/properties/action"): v.NOT_HARDWARE_ACTIONS,
    ("recovery-actions", "$defs/action/properties/action"): v.RECOVERY_ACTIONS,
    ("sxid-catalog", "$defs/handling/properties/action"): v.SXID_ACTIONS,
    ("remediation", "$defs/step/properties/action"): v.STEP_ACTIONS,
    ("remediation", "$defs/policy/properties/action"): frozenset(v.REMEDIATION_ACTIONS),
    ("ruletest", "$defs/incident/properties/remediation"): frozenset(v.REMEDIATION_ACTIONS),
}
# nvlink is also a category; none is no word of its own
WORDS = (v.SIGNAL_KINDS | set(v.Detail) | set(v.GpuAction) | set(v.RemediationAction) | set(v.VerdictKind)) - {
    "nvlink", "none"}


def _enums(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, list[Any]]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "enum" and isinstance(value, list):
                yield "/".join(path), value
            else:
                yield from _enums(value, path + (str(key),))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _enums(value, path + (str(i),))


def _kind_enums() -> dict[tuple[str, str], list[Any]]:
    out = {}
    for f in sorted(SCHEMAS.glob("*.schema.json")):
        name = f.name.removesuffix(".schema.json")
        for path, values in _enums(json.loads(f.read_text(encoding="utf-8"))):
            if set(map(str, values)) & WORDS:
                out[(name, path)] = values
    return out


def test_every_schema_enum_naming_kinds_or_details_is_one_of_the_vocabulary_sets() -> None:
    found = _kind_enums()
    assert set(found) == set(ENUMS), f"enums of kinds the vocabulary has no set for: {sorted(set(found) - set(ENUMS))}"
    for where, values in found.items():
        want = ENUMS[where]
        assert len(values) == len(set(values)) and set(values) == want, (
            f"{where[0]}.schema.json {where[1]} is stale; list {json.dumps(sorted(want))}")


def test_the_vocabulary_sets_hold_only_its_words() -> None:
    kinds = set(v.SignalKind)
    assert set(v.KINDS) == kinds
    assert set(v.DETAIL_TITLES) == set(v.Detail) and v.COUNTED_DETAILS | v.MISSING_DETAILS <= set(v.Detail)
    assert not kinds & set(v.Detail), "a word is either a kind or a detail"
    for name in ("RULED_KINDS", "EVIDENCE_KINDS", "HISTORY_KINDS", "REMEDIATION_KINDS", "SUSPECT_CHOICES",
                 "NEVER_STORM", "NEVER_CAUSE", "NEVER_FAULT", "NOT_FAULTS"):
        assert getattr(v, name) <= kinds, name
    assert set(v.SUSPECT_KINDS) <= v.SUSPECT_CHOICES
    # the "never" sets nest: what never storms never causes, never is a fault, and no fault is a bad node
    assert v.NEVER_STORM < v.NEVER_CAUSE < v.NEVER_FAULT < v.NOT_FAULTS


@pytest.mark.parametrize("kind", KINDS)
def test_a_signals_rule_may_name_every_kind_but_the_engines_own(kind: str) -> None:
    rule: dict[str, object] = {"match": ['alertname="A"'], "kind": kind}
    if kind == v.SignalKind.METRICS_MISSING:
        rule["detail"] = "exporter_down"  # what is missing: required
    errors = list(validator("signals").iter_errors({"signals": [rule]}))
    assert (not errors) == (kind in v.RULED_KINDS), errors


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_passes_the_storm_check(kind: str) -> None:
    storm: JSONObject = {"signals": [kind], "followers": [f'signal="{kind}"'],
             "events": [{"name": "e", "match": [f'signal="{kind}"', f'signal=~"{kind}|xid"'], "by": ["cluster"]}]}
    assert storm_warnings(storm) == []
    assert len(storm_warnings({"signals": [kind + "s"], "followers": [f'signal="{kind}s"']})) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_matcher_on_every_kind_matches_its_alerts_only(kind: str) -> None:
    alert = Alert("f", FIRING, {"alertname": "A"}, {}, datetime(2026, 1, 1, tzinfo=timezone.utc), None,
                  signal=Signal(kind=kind))
    fields = fields_of(alert)
    assert match_all(parse_matchers([f'signal="{kind}"']), fields)
    assert match_all(parse_matchers([f'signal=~"{kind}|none"']), fields)
    others = "|".join(k for k in KINDS if k != kind)
    assert not match_all(parse_matchers([f'signal=~"{others}"']), fields)


def test_alertd_check_warns_of_no_kind_in_the_vocabulary(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "rules", tmp_path / "rules", ignore=shutil.ignore_patterns("tests"))
    shutil.copytree(ROOT / "runbooks", tmp_path / "runbooks")
    corr = tmp_path / "rules" / "correlation.yml"
    shipped = """followers: ['signal=~"metrics_missing|node_not_ready"']"""
    text = corr.read_text()
    assert shipped in text
    every = ", ".join(f"'signal=\"{k}\"'" for k in [*KINDS, "no_such_kind"])
    corr.write_text(text.replace(shipped, f"followers: [{every}]"))
    report = check([tmp_path / "rules"])
    assert report.ok, report.errors
    named = [p.message.split(" names signal kind ")[1].split(",")[0] for p in report.warnings
             if "names signal kind" in p.message]
    assert named == ["'no_such_kind'"], named



def test_the_weak_and_log_host_labels_are_node_labels_every_reader_shares() -> None:
    from alertd.alertmanager.silences import silence_matchers
    from alertd.engine.normalize import NormalizeConfig

    assert v.WEAK_NODE_LABELS | set(v.LOG_HOST_LABELS) < set(v.NODE_LABELS)
    assert len(set(v.NODE_LABELS)) == len(v.NODE_LABELS)
    assert NormalizeConfig().node_labels == v.NODE_LABELS
    assert silence_matchers.__defaults__ is not None and v.NODE_LABELS in silence_matchers.__defaults__


@pytest.mark.parametrize("made, text", [
    (v.signal_is(v.SignalKind.THERMAL), 'signal="thermal"'),
    (v.signal_is(v.SignalKind.OTHER, v.SignalKind.WATCHDOG, negate=True), 'signal!~"other|watchdog"'),
    (v.signal_is(v.SignalKind.OTHER, negate=True), 'signal!="other"'),
    (v.detail_is("", v.Detail.NODE_DOWN), 'detail=~"|node_down"'),
])
def test_the_matcher_texts_of_the_defaults_read_as_written_by_hand(made: str, text: str) -> None:
    assert made == text
    assert str(parse_matchers([made])[0]) == text


def test_routing_and_rendering_name_only_event_kinds_of_the_vocabulary() -> None:
    from alertd.app.verdicts import JUDGED_KINDS
    from alertd.integrations.slack.render import EVENT_ICON
    from alertd.notify import router

    kinds = set(v.EventKind)
    for name in ("QUIET_KINDS", "PAGER_KINDS", "URGENT_KINDS", "RESOLUTION_KINDS", "ROUTE_CHANGING", "CHILD_KINDS"):
        assert getattr(router, name) <= kinds, name
    assert JUDGED_KINDS <= kinds and set(EVENT_ICON) <= kinds and set(v.EVENT_WORDS) <= kinds
    assert all(k.startswith(v.REMEDIATION_EVENT) for k in kinds if "remediation" in k)


def test_a_timeline_event_stores_its_kind_as_a_plain_word() -> None:
    """Annotations and timelines are written by orjson, which takes no str subclass as a key."""
    from alertd.core.model import Incident, OPEN, Severity

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    inc = Incident("i", "k", "node", "t", Severity.WARNING, "hardware", OPEN, at, at)
    assert type(inc.add_event(at, v.EventKind.OPENED).kind) is str
    assert type(Signal().kind) is str
