"""Bad input never gets a 5xx, against a live ``alertd serve`` process.

- Schemathesis generates requests for every operation in docs/openapi.yaml (valid
  and invalid: wrong types, missing fields, odd strings, in bodies, paths, queries
  and headers) and checks that none is answered with a server error.
- Hypothesis generates webhooks from the webhook JSON Schema and from mutations of
  a real Alertmanager notification; each must be stored (200) or refused (400
  naming the field), and what is stored must go through the engine (no row
  quarantined, no failed step).

Both are bounded in examples (and so in time); the counts are printed.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from schemathesis.checks import not_a_server_error

from alertd.schemas import schema as load_schema
from tests.support.alertd_proc import AlertdProcess
from tests.support.process import http
from tests.support.webhooks import gpu_alert, webhook

ROOT = Path(__file__).resolve().parents[2]
API_TOKEN = "fuzz-admin-token-5c1e9a7f3b"
HOOK_TOKEN = "fuzz-hook-token-2d8b6e0c4a"
SCHEMA = schemathesis.openapi.from_path(str(ROOT / "docs" / "openapi.yaml"))
EXAMPLES_PER_OPERATION = 40
WEBHOOK_EXAMPLES = 150
counts = {"schemathesis": 0, "hypothesis": 0, "stored": 0, "refused": 0}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    proc = AlertdProcess(tmp_path_factory.mktemp("fuzz"), {
        "api": {"auth": {"tokens": [{"name": "fuzzer", "role": "admin", "token": API_TOKEN}]}},
        "receiver": {"auth": {"bearer_token": HOOK_TOKEN}, "max_body_bytes": 65536},
        "notify": {"slack": {"signing_secret": "fuzz-signing-secret-000"}},
    })
    proc.start()
    status, _, _ = proc.post(webhook([_alert("gpu-node-1", 0, 0)], cluster="prod", node="gpu-node-1"),
                             {"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert status == 200
    yield proc
    proc.stop()
    print(f"\nfuzzing: {counts}")


def _alert(node: str, gpu: int, kind: int, status: str = "firing") -> dict:
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=3)
    return gpu_alert("prod", node, gpu, kind, starts_at=starts, status=status)


def _assert_engine_clean(proc: AlertdProcess) -> None:
    metrics = proc.metrics()
    failed = {k: v for k, v in metrics.items() if k.startswith("alertd_store_errors_total") and v}
    assert not failed, f"{failed}\n{proc.log_tail()}"


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case, live):
    token = HOOK_TOKEN if case.path == "/api/v1/alerts/alertmanager" else API_TOKEN
    counts["schemathesis"] += 1
    case.call_and_validate(base_url=live.url, headers={"Authorization": f"Bearer {token}"},
                           checks=[not_a_server_error], timeout=30)


def _post(proc: AlertdProcess, doc) -> tuple[int, object]:
    status, body, _ = proc.post(json.dumps(doc).encode(), {"Authorization": f"Bearer {HOOK_TOKEN}"})
    return status, body


def _check(proc: AlertdProcess, doc) -> None:
    counts["hypothesis"] += 1
    status, body = _post(proc, doc)
    assert status in (200, 400, 413), (status, body, doc)
    if status == 200:
        counts["stored"] += 1
    else:
        counts["refused"] += 1
        assert isinstance(body, dict) and body.get("error"), body
        if status == 400 and isinstance(doc, dict) and doc.get("version") == "4":
            assert "field" in body, body  # a schema-level refusal names the field


WEBHOOK = load_schema("webhook")
DEFS = WEBHOOK["$defs"]


def _from(spec: dict) -> st.SearchStrategy:
    """Values valid for one property of the webhook schema (its own enums and regular expressions)."""
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    if "const" in spec:
        return st.just(spec["const"])
    if "$ref" in spec and spec["$ref"].endswith("/timestamp"):  # the pattern, and real instants at any offset
        offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
        real = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets)
        return st.one_of(_from(DEFS["timestamp"]), real.map(lambda d: d.isoformat(timespec="seconds")),
                         real.map(lambda d: d.isoformat()))
    if "$ref" in spec:
        return _from(DEFS[spec["$ref"].rsplit("/", 1)[1]])
    if spec.get("type") == "string":
        return st.from_regex(spec["pattern"], fullmatch=True) if "pattern" in spec else st.text(max_size=30)
    if spec.get("type") == "integer":
        return st.integers(min_value=spec.get("minimum"))
    if spec.get("type") == "object" and "additionalProperties" in spec:
        return st.dictionaries(st.text(max_size=20), _from(spec["additionalProperties"]), max_size=6)
    if spec.get("type") == "object":
        required = set(spec.get("required", ()))
        return st.fixed_dictionaries({k: _from(v) for k, v in spec["properties"].items() if k in required},
                                     optional={k: _from(v) for k, v in spec["properties"].items() if k not in required})
    if spec.get("type") == "array":
        return st.lists(_from(spec["items"]), max_size=5)
    raise AssertionError(f"no strategy for {spec}")


@given(doc=_from(WEBHOOK))
@settings(max_examples=WEBHOOK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_schema_shaped_webhooks_are_stored_or_refused(live, doc):
    _check(live, doc)


# A real notification, then each field replaced by something a sender could plausibly get wrong.
EDGE_TIMES = st.sampled_from([
    "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
    "1969-12-31T23:59:59Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-30T24:00:00Z",
    "2026-11-30T12:00:00+24:00", "2026-11-30T12:00:00.123456789Z", "2026-11-30T12:00:00-00:00",
])
TEXT = st.text(max_size=40)
VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT,
                  st.lists(TEXT, max_size=3), st.dictionaries(TEXT, TEXT, max_size=3))


@st.composite
def mutated(draw) -> dict:
    alerts = [_alert(f"gpu-node-{draw(st.integers(0, 9))}", draw(st.integers(0, 7)), draw(st.integers(0, 8)),
                     draw(st.sampled_from(["firing", "resolved"])))
              for _ in range(draw(st.integers(1, 4)))]
    doc = webhook(alerts, cluster="prod", node="gpu-node-1")
    for _ in range(draw(st.integers(1, 3))):
        alert = draw(st.sampled_from(doc["alerts"]))
        where = draw(st.sampled_from(["startsAt", "endsAt", "status", "fingerprint", "label", "annotation",
                                      "top", "truncatedAlerts", "labels"]))
        if where in ("startsAt", "endsAt"):
            alert[where] = draw(st.one_of(EDGE_TIMES, VALUE))
        elif where == "label" and isinstance(alert.get("labels"), dict):
            alert["labels"][draw(st.sampled_from(["node", "gpu", "xid", "Hostname", "UUID", draw(TEXT)]))] = draw(
                st.one_of(TEXT, VALUE))
        elif where == "annotation" and isinstance(alert.get("annotations", {}), dict):
            alert.setdefault("annotations", {})[draw(TEXT)] = draw(st.one_of(TEXT, VALUE))
        elif where == "top":
            doc[draw(st.sampled_from(["version", "status", "alerts", "groupKey", "commonLabels"]))] = draw(VALUE)
        elif where == "truncatedAlerts":
            doc["truncatedAlerts"] = draw(st.one_of(st.integers(), VALUE))
        elif where not in ("label", "annotation"):
            alert[where] = draw(VALUE)
        if not isinstance(doc.get("alerts"), list):
            break
    return doc


@given(doc=mutated())
@settings(max_examples=WEBHOOK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_mutated_alertmanager_webhooks_are_stored_or_refused(live, doc):
    _check(live, doc)


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z"])
def test_out_of_range_times_are_400_naming_the_field_and_counted(live, when):
    doc = webhook([_alert("gpu-node-2", 0, 0)], cluster="prod", node="gpu-node-2")
    doc["alerts"][0]["startsAt"] = when
    before = live.metrics().get('alertd_webhooks_rejected_total{reason="schema"}', 0)
    status, body = _post(live, doc)
    assert status == 400 and body["field"] == "alerts.0.startsAt", body
    assert live.metrics()['alertd_webhooks_rejected_total{reason="schema"}'] == before + 1


def _cursor(text: str) -> str:
    import base64

    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("path,field", [
    ("/api/v1/incidents?since=99999999y", "since"),  # before year 1
    ("/api/v1/incidents?until=9999999999w", "until"),
    ("/api/v1/incidents?until=0001-01-01T00:00:00%2B01:00", "until"),  # year 0 in UTC
    (f"/api/v1/incidents?cursor={_cursor('9' * 40)}", "cursor"),  # beyond a 64-bit integer
    (f"/api/v1/nodes/gpu-node-1?cursor={_cursor('9' * 40)}", "cursor"),
    ("/api/v1/audit?since=9999-12-31T23:59:59-01:00", "since"),
])
def test_edge_query_parameters_are_400_naming_the_field(live, path, field):
    status, _, raw = http("GET", live.url + path, headers={"Authorization": f"Bearer {API_TOKEN}"})
    assert status == 400 and json.loads(raw)["field"] == field, raw


def test_a_malformed_form_is_400(live):
    status, _, raw = http("POST", live.url + "/ui/login", b"token=x",
                          {"Content-Type": "multipart/form-data", "Authorization": f"Bearer {API_TOKEN}"})
    assert status == 400, raw


def test_the_engine_took_everything_that_was_stored(live):
    """Runs last in this module: every stored example went through the engine without a failure."""
    live.wait_drained(60)
    _assert_engine_clean(live)
    status, _, body = http("GET", live.url + "/api/v1/openapi.yaml")
    assert status == 200 and body.startswith(b"# alertd's HTTP API")
