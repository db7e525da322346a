"""JSON nested about as deep as Python can go, on every route that reads a JSON body: a 400, or (when
shallow enough to be an unknown field Alertmanager might add) stored and taken by the engine; never a 5xx."""
from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from testkit.notify_harness import HOOK, hook, wait_for, xid_alert


def nested(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


def placed(doc: dict, where: str, deep: str) -> str:
    marker = '"__deep__"'
    if where == "document":
        return deep
    if where == "unknown-field":
        doc["routeLabels"] = "__deep__"
    elif where == "alert-field":
        doc["alerts"][0]["somethingNew"] = "__deep__"
    elif where == "label":
        doc["alerts"][0]["labels"]["deep"] = "__deep__"
    elif where == "alerts-item":
        doc["alerts"].append("__deep__")
    return json.dumps(doc).replace(marker, deep, 1)


@pytest.mark.parametrize("depth", [990, 1000, 100_000])
@pytest.mark.parametrize("kind", ["list", "object"])
@pytest.mark.parametrize("where", ["document", "unknown-field", "alert-field", "label", "alerts-item"])
async def test_deep_webhooks_are_400_or_taken(harness, depth, kind, where):
    doc = hook(xid_alert(f"deep-{where}-{kind}-{depth}", 1))
    body = placed(doc, where, nested(depth, kind))
    resp = await harness.client.post(HOOK, data=body, headers={"Content-Type": "application/json"})
    answer = await resp.json()
    assert resp.status in (200, 400), (resp.status, answer)
    if resp.status == 400:
        assert answer["error"], answer
        return
    node = doc["alerts"][0]["labels"]["node"]
    found = await wait_for(lambda: harness.incidents(node=node))
    assert [i["node"] for i in found] == [node]
    errors = {op: harness.svc.metrics.store_errors.labels(op)._value.get() for op in ("process", "quarantine")}
    assert errors == {"process": 0, "quarantine": 0}, errors


@pytest.mark.parametrize("depth", [990, 1000, 100_000])
async def test_a_signed_slack_action_nested_too_deep_is_400(harness, depth):
    body = urlencode({"payload": nested(depth, "list")}).encode()
    resp = await harness.client.post("/api/v1/slack/actions", data=body, headers=harness.signed(body))
    assert resp.status == 400, await resp.text()
