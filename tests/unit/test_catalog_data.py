"""The GPU knowledge pack: rules/xid-catalog.yml, rules/signals.yml and runbooks/.

These are data files edited by hand, so the tests check them the way a reviewer
would: against their JSON Schemas, against NVIDIA's catalog facts the rest of
the code relies on, and against each other (every runbook they name exists).
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "rules" / "xid-catalog.yml"
SIGNALS = ROOT / "rules" / "signals.yml"
RUNBOOKS = ROOT / "runbooks"
SCHEMAS = ROOT / "alertd" / "schemas"

REQUIRED_CODES = {
    13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120, 121,
    140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155, 156, 157, 158,
}
# Every code NVIDIA's Ampere-and-newer catalog marks applicable to at least one of
# A100, H100, B100 or GB200 (the rest are "Unused" there).
APPLICABLE_CODES = (
    {8, 11, 13, 14, 25, 31, 32, 37, 38, 39, 40, 41, 43, 44, 45, 46, 48, 54, 60, 62, 63, 64, 66, 67}
    | {68, 69, 70, 71, 72, 74, 75, 76, 77, 78, 79, 80, 82, 83, 84, 85, 86, 88, 89}
    | set(range(92, 111))
    | {119, 120, 121}
    | set(range(126, 138))
    | set(range(139, 152))
    | set(range(154, 173))
)
# NVIDIA immediate action RESTART_APP: the job's fault, the GPU is healthy.
RESTART_APP_CODES = {13, 31, 32, 43, 68, 69, 94}
# NVIDIA immediate action RESET_GPU. 157 is deliberately absent: NVIDIA's catalog
# gives it IGNORE / CONTACT_SUPPORT (no spare resources left, a reset repairs
# nothing), so the catalog sends it to the vendor instead of resetting.
RESET_GPU_CODES = {62, 64, 95, 109, 119, 120, 140, 143, 155, 156, 158}
NVLINK_CODES = {74, 144, 145, 146, 147, 148, 149, 150}
FALLOUT_CODES = {45}

SEVERITY_BY_ACTION = {"reboot_node": "critical", "reset_gpu": "error", "restart_app": "warning", "ignore": "info"}
MATCHER = re.compile(r'^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*$')


def _load(path: Path):
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _errors(validator: Draft202012Validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture(scope="module")
def catalog() -> dict:
    return _load(CATALOG)


@pytest.fixture(scope="module")
def entries(catalog) -> dict[int, dict]:
    return {e["code"]: e for e in catalog["xids"]}


@pytest.fixture(scope="module")
def signals() -> dict:
    return _load(SIGNALS)


@pytest.fixture(scope="module")
def xid_schema() -> Draft202012Validator:
    return _validator("xid-catalog")


@pytest.fixture(scope="module")
def signals_schema() -> Draft202012Validator:
    return _validator("signals")


# --- Xid catalog -------------------------------------------------------------


def test_catalog_matches_its_schema(catalog, xid_schema):
    assert _errors(xid_schema, catalog) == []


def test_schema_documents_every_field():
    for name in ("xid-catalog", "signals"):
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        undocumented = []

        def walk(node, where):
            if isinstance(node, dict):
                for key, sub in (node.get("properties") or {}).items():
                    if "description" not in sub:
                        undocumented.append(f"{where}.{key}")
                for key, sub in node.items():
                    if key not in ("if", "then", "else"):  # conditions restate documented fields
                        walk(sub, f"{where}.{key}")
            elif isinstance(node, list):
                for i, sub in enumerate(node):
                    walk(sub, f"{where}[{i}]")

        walk(schema, name)
        assert undocumented == [], f"fields without a description: {undocumented}"


def test_codes_are_unique(catalog):
    codes = [e["code"] for e in catalog["xids"]]
    duplicates = sorted({c for c in codes if codes.count(c) > 1})
    assert duplicates == []


def test_required_codes_present(entries):
    assert sorted(REQUIRED_CODES - entries.keys()) == []


def test_every_applicable_code_present(entries):
    assert sorted(APPLICABLE_CODES - entries.keys()) == []


def test_restart_app_codes_are_application_faults(entries):
    for code in sorted(RESTART_APP_CODES):
        e = entries[code]
        assert (e["category"], e["action"], e["severity"], e["drain"]) == (
            "application", "restart_app", "warning", False,
        ), f"Xid {code}"


def test_reset_gpu_codes_reset_the_gpu(entries):
    for code in sorted(RESET_GPU_CODES):
        e = entries[code]
        assert e["action"] == "reset_gpu", f"Xid {code}"
        assert e["drain"] is True, f"Xid {code}: a reset needs the GPU drained"


def test_fallen_off_the_bus_reboots_the_node(entries):
    e = entries[79]
    assert (e["category"], e["action"], e["severity"], e["drain"]) == ("hardware", "reboot_node", "critical", True)


def test_fallout_codes_fold_and_nothing_else_does(entries):
    folding = {code for code, e in entries.items() if e["fold_into_previous"]}
    assert folding == FALLOUT_CODES
    assert entries[45]["severity"] == "info"
    assert entries[45]["drain"] is False


def test_memory_and_nvlink_workflows(entries):
    assert entries[48]["category"] == "memory"
    assert entries[48]["action"] == "reset_gpu"
    assert (entries[63]["action"], entries[63]["category"], entries[63]["severity"]) == ("ignore", "informational", "info")
    assert (entries[92]["action"], entries[92]["category"]) == ("watch", "memory")
    for code in sorted(NVLINK_CODES):
        assert entries[code]["category"] == "nvlink", f"Xid {code}"


def test_recovery_action_decoding_is_in_xid_154(entries):
    e = entries[154]
    assert (e["category"], e["severity"]) == ("informational", "info")
    text = e["meaning"].lower()
    for needle in ("0 is none", "1 gpu reset", "2 node reboot", "3 drain p2p", "4 drain and reset"):
        assert needle in text, f"Xid 154 meaning should decode {needle!r}"


def test_severity_follows_action(entries):
    for code, e in sorted(entries.items()):
        expected = SEVERITY_BY_ACTION.get(e["action"])
        if e["category"] == "informational":
            expected = "info"
        elif e["action"] == "watch":
            expected = "warning"
        if expected is not None:
            assert e["severity"] == expected, f"Xid {code}: {e['action']} should be {expected}"


def test_runbook_matches_category(entries):
    for code, e in sorted(entries.items()):
        assert e["runbook"] == f"xid-{e['category']}", f"Xid {code}"


def test_every_entry_names_its_source(entries):
    for code, e in sorted(entries.items()):
        assert "NVIDIA" in e["source"], f"Xid {code}: source should name the NVIDIA document"


def test_meaning_is_short(entries):
    for code, e in sorted(entries.items()):
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", e["meaning"].strip()) if s]
        assert 1 <= len(sentences) <= 3, f"Xid {code}: meaning has {len(sentences)} sentences"


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda e: e.update(extra="x"), id="unknown-field"),
        pytest.param(lambda e: e.update(severity="fatal"), id="bad-severity"),
        pytest.param(lambda e: e.update(action="reboot"), id="bad-action"),
        pytest.param(lambda e: e.update(category="gpu"), id="bad-category"),
        pytest.param(lambda e: e.pop("source"), id="missing-source"),
        pytest.param(lambda e: e.update(code="79"), id="code-not-integer"),
        pytest.param(lambda e: e.update(runbook="xid-hardware.md"), id="runbook-with-suffix"),
        pytest.param(lambda e: e.update(drain=False), id="reboot-without-drain"),
        pytest.param(lambda e: e.update(fold_into_previous=True), id="fold-with-critical-severity"),
    ],
)
def test_schema_rejects_bad_entries(entries, xid_schema, mutate):
    entry = copy.deepcopy(entries[79])
    mutate(entry)
    assert _errors(xid_schema, {"xids": [entry]}) != []


def test_schema_rejects_unknown_top_level_key(catalog, xid_schema):
    assert _errors(xid_schema, {**catalog, "version": 1}) != []


# --- Signals -----------------------------------------------------------------


def test_signals_match_their_schema(signals, signals_schema):
    assert _errors(signals_schema, signals) == []


def test_matchers_are_well_formed_and_regexes_compile(signals):
    for i, rule in enumerate(signals["signals"]):
        for text in rule["match"]:
            m = MATCHER.match(text)
            assert m, f"signals[{i}]: {text!r} is not name op \"value\""
            if m.group("op") in ("=~", "!~"):
                value = re.sub(r"\\(.)", r"\1", m.group("value"))
                try:
                    re.compile(value)
                except re.error as exc:  # pragma: no cover - the assertion reports it
                    pytest.fail(f"signals[{i}]: {text!r}: {exc}")


@pytest.mark.parametrize("bad", ['alertname=Watchdog', 'alertname=="Watchdog"', '="x"', 'alertname~"x"'])
def test_matcher_check_rejects_malformed(bad, signals_schema):
    assert MATCHER.match(bad) is None
    doc = {"signals": [{"kind": "watchdog", "match": [bad]}]}
    assert _errors(signals_schema, doc) != []


def test_schema_rejects_bad_signal_rules(signals_schema):
    good = {"kind": "metrics_missing", "detail": "node_down", "match": ['alertname="NodeDown"']}
    assert _errors(signals_schema, {"signals": [good]}) == []
    for bad in (
        {**good, "kind": "other"},
        {k: v for k, v in good.items() if k != "detail"},
        {**good, "detail": "gpu_gone"},
        {**good, "match": []},
        {**good, "severity": "page"},
        {**good, "name": "x"},
    ):
        assert _errors(signals_schema, {"signals": [bad]}) != [], bad


def _classify(signals: dict, labels: dict[str, str]) -> dict | None:
    """First-match classification with the project's own matcher parser."""
    from alertd.core.matchers import match_all, parse_matchers

    for rule in signals["signals"]:
        if match_all(parse_matchers(rule["match"]), labels):
            return rule
    return None


@pytest.mark.parametrize(
    "labels, kind, detail",
    [
        ({"alertname": "GPUXidError", "xid": "79", "gpu": "3"}, "xid", None),
        ({"alertname": "DCGMXidErrors", "xid": "13"}, "xid", None),
        ({"alertname": "GPUClockEventThrottling", "clock_event_reasons": "72"}, "thermal", None),
        ({"alertname": "GPUTemperatureHigh"}, "thermal", "temperature"),
        ({"alertname": "GPUEccDoubleBitErrors"}, "ecc", None),
        ({"alertname": "GPURowRemapFailure"}, "row_remap", None),
        ({"alertname": "GPURowRemapPending"}, "row_remap", None),
        ({"alertname": "GPUNVLinkErrors"}, "nvlink", None),
        ({"alertname": "DCGMExporterDown"}, "metrics_missing", "exporter_down"),
        ({"alertname": "NodeDown"}, "metrics_missing", "node_down"),
        ({"alertname": "GPUCountDropped"}, "metrics_missing", "gpu_missing"),
        ({"alertname": "KubeNodeCordoned", "node": "n1"}, "node_cordoned", None),
        ({"alertname": "KubeNodeNotReady", "node": "n1"}, "node_not_ready", None),
        ({"alertname": "Watchdog"}, "watchdog", None),
    ],
)
def test_alerts_classify_as_expected(signals, labels, kind, detail):
    rule = _classify(signals, labels)
    assert rule is not None, labels
    assert rule["kind"] == kind
    assert rule.get("detail") == detail


@pytest.mark.parametrize(
    "labels",
    [{"alertname": "KubePodCrashLooping"}, {"alertname": "SomethingElse", "xid": ""}, {"alertname": "X", "xid": "n/a"}],
)
def test_unrelated_alerts_are_other(signals, labels):
    assert _classify(signals, labels) is None


def test_xid_label_is_evidence_not_a_signals_entry(signals):
    """Any alert with an xid label is an Xid, but as evidence (rules/evidence.yml), below the site's names."""
    evidence = yaml.safe_load((ROOT / "rules" / "evidence.yml").read_text())["evidence"]
    assert {"kind": "xid", "match": ['xid=~"[0-9]+"']} in evidence["labels"]
    assert all(rule["match"] != ['xid=~"[0-9]+"'] for rule in signals["signals"])


# --- Runbooks ----------------------------------------------------------------


def _referenced_runbooks(entries: dict, signals: dict) -> dict[str, list[str]]:
    refs: dict[str, list[str]] = {}
    for code, e in entries.items():
        refs.setdefault(e["runbook"], []).append(f"Xid {code}")
    for i, rule in enumerate(signals["signals"]):
        if rule.get("runbook"):
            refs.setdefault(rule["runbook"], []).append(f"signals[{i}] ({rule['kind']})")
    return refs


def test_every_referenced_runbook_exists(entries, signals):
    missing = {name: users for name, users in _referenced_runbooks(entries, signals).items() if not (RUNBOOKS / f"{name}.md").is_file()}
    assert missing == {}


def test_every_non_xid_signal_has_a_runbook(signals):
    for i, rule in enumerate(signals["signals"]):
        if rule["kind"] != "xid":
            assert rule.get("runbook"), f"signals[{i}] ({rule['kind']}) has no runbook"


def test_runbook_index_lists_every_page():
    index = (RUNBOOKS / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z0-9-]+)\.md\)", index))
    pages = {p.stem for p in RUNBOOKS.glob("*.md") if p.name != "README.md"}
    assert pages - linked == set(), "pages missing from runbooks/README.md"
    assert linked - pages == set(), "runbooks/README.md links pages that do not exist"


def test_runbook_cross_links_resolve():
    for page in RUNBOOKS.glob("*.md"):
        for target in re.findall(r"\]\(([a-z0-9-]+\.md)\)", page.read_text(encoding="utf-8")):
            assert (RUNBOOKS / target).is_file(), f"{page.name} links missing {target}"
