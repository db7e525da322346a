"""Bad input never gets a 5xx, against a live ``alertd serve`` process.

- Schemathesis generates requests for every operation in docs/openapi.yaml (valid
  and invalid: wrong types, missing fields, odd strings, in bodies, paths, queries
  and headers) and checks that none is answered with a server error.
- Hypothesis generates signed Slack actions (schemathesis cannot sign, so it only
  reaches the 401): arbitrary JSON payloads and bodies, none answered 5xx.
- Hypothesis generates webhooks from the webhook JSON Schema and from mutations of
  a real Alertmanager notification; each must be stored (200) or refused (400
  naming the field), and what is stored must go through the engine (no row
  quarantined, no failed step).

Both are bounded in examples (and so in time); the counts are printed.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from schemathesis.checks import not_a_server_error

from testkit.alertd_proc import AlertdProcess
from testkit.process import http
from testkit.webhook_strategies import fuzz_alert as _alert, mutated, schema_shaped
from testkit.webhooks import webhook

ROOT = Path(__file__).resolve().parents[2]
API_TOKEN = "fuzz-admin-token-5c1e9a7f3b"
HOOK_TOKEN = "fuzz-hook-token-2d8b6e0c4a"
SCHEMA = schemathesis.openapi.from_path(str(ROOT / "docs" / "openapi.yaml"))
EXAMPLES_PER_OPERATION = 40
WEBHOOK_EXAMPLES = 150
SLACK_EXAMPLES = 150
SIGNING_SECRET = "fuzz-signing-secret-000"
counts = {"schemathesis": 0, "operations": 0, "hypothesis": 0, "stored": 0, "refused": 0, "slack_signed": 0}
seen_operations: set[str] = set()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    proc = AlertdProcess(tmp_path_factory.mktemp("fuzz"), {
        "api": {"auth": {"tokens": [{"name": "fuzzer", "role": "admin", "token": API_TOKEN}]}},
        "receiver": {"auth": {"bearer_token": HOOK_TOKEN}, "max_body_bytes": 65536},
        "notify": {"slack": {"signing_secret": SIGNING_SECRET}},
    })
    proc.start()
    status, _, _ = proc.post(webhook([_alert("gpu-node-1", 0, 0)], cluster="prod", node="gpu-node-1"),
                             {"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert status == 200
    yield proc
    proc.stop()
    print(f"\nfuzzing: {counts}")


def _assert_engine_clean(proc: AlertdProcess) -> None:
    metrics = proc.metrics()
    failed = {k: v for k, v in metrics.items() if k.startswith("alertd_store_errors_total") and v}
    assert not failed, f"{failed}\n{proc.log_tail()}"


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case, live):
    token = HOOK_TOKEN if case.path == "/api/v1/alerts/alertmanager" else API_TOKEN
    counts["schemathesis"] += 1
    seen_operations.add(case.operation.label)
    counts["operations"] = len(seen_operations)
    case.call_and_validate(base_url=live.url, headers={"Authorization": f"Bearer {token}"},
                           checks=[not_a_server_error], timeout=30)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                    max_leaves=20)
ACTION = st.fixed_dictionaries({
    "action_id": st.sampled_from(["alertd_ack", "alertd_resolve", "alertd_silence_1h", "alertd_unsilence", "other"])
    | st.text(max_size=30),
    "value": st.sampled_from(["INC-1", "INC-999999", "x:INC-1", ""]) | st.text(max_size=30) | JSON,
})
SLACK_PAYLOAD = st.one_of(
    JSON,
    st.fixed_dictionaries({"type": st.sampled_from(["block_actions", "view_submission"]) | JSON,
                           "user": st.fixed_dictionaries({"id": JSON, "username": JSON}) | JSON,
                           "actions": st.lists(ACTION | JSON, max_size=3) | JSON}),
)


@given(payload=SLACK_PAYLOAD, raw=st.booleans(), junk=st.binary(max_size=60))
@settings(max_examples=SLACK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_signed_slack_actions_never_get_a_server_error(live, payload, raw, junk):
    """Schemathesis cannot sign a request, so it only reaches the 401: these are signed, and reach the
    payload's parsing and the actions (on real and unknown incidents)."""
    counts["slack_signed"] += 1
    body = junk if raw else urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    status, _, answer = http("POST", live.url + "/api/v1/slack/actions", body,
                             {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig,
                              "Content-Type": "application/x-www-form-urlencoded"})
    assert 200 <= status < 500, (status, answer, body[:200])


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


@given(doc=schema_shaped())
@settings(max_examples=WEBHOOK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_schema_shaped_webhooks_are_stored_or_refused(live, doc):
    _check(live, doc)


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
    status, _, raw = http("POST", live.url + "/ui/login", b"token=\xff\xfe",  # not UTF-8
                          {"Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Bearer {API_TOKEN}"})
    assert status == 400, raw
    status, _, raw = http("POST", live.url + "/ui/login", b"token=x", {"Content-Type": "multipart/form-data"})
    assert status == 415, raw  # alertd's forms are urlencoded


def test_the_engine_took_everything_that_was_stored(live):
    """Runs last in this module: every stored example went through the engine without a failure."""
    live.wait_drained(60)
    _assert_engine_clean(live)
    status, _, body = http("GET", live.url + "/api/v1/openapi.yaml")
    assert status == 200 and body.startswith(b"# alertd's HTTP API")
