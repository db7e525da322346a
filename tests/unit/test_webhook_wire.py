"""The receive path's msgspec types never take what the webhook JSON Schema refuses, and take what it
takes the same way: generated documents go through both paths and must agree."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from alertd.receive import wire
from alertd.receive.payload import BadPayload, decode_body, parse_notification, read_notification, read_stored
from alertd.schemas import validator
from testkit.webhook_strategies import mutated, schema_shaped
from testkit.webhooks import gpu_alert, webhook

AT = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def _agree(doc: object) -> None:
    raw = json.dumps(doc).encode()
    schema_ok = isinstance(doc, dict) and not list(validator("webhook").iter_errors(doc))
    try:
        wire.decode(raw)
        wire_ok = True
    except msgspec.DecodeError:  # ValidationError too
        wire_ok = False
    assert not (wire_ok and not schema_ok), f"msgspec took what the schema refuses: {raw[:300]!r}"
    try:
        fast = read_notification(raw, AT)
    except BadPayload as exc:
        fast = exc
    try:
        checked = read_notification(raw, AT, build=False)  # the receive path: checked, no Alert built
    except BadPayload as exc:
        checked = exc
    try:
        slow = parse_notification(decode_body(raw), AT)
    except BadPayload as exc:
        slow = exc
    if isinstance(slow, BadPayload):
        for got in (fast, checked):
            assert isinstance(got, BadPayload) and (str(got), got.field) == (str(slow), slow.field)
    else:
        assert not isinstance(fast, BadPayload), fast
        assert fast == slow
        assert not isinstance(checked, BadPayload), checked
        assert checked.count == len(slow.alerts) and (checked.truncated, checked.receiver) == (slow.truncated, slow.receiver)
        assert read_stored(raw, AT).alerts == slow.alerts  # what the receiver took, the engine reads the same


@given(doc=st.one_of(schema_shaped(), mutated()))
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
def test_fast_and_schema_paths_agree_on_generated_webhooks(doc):
    _agree(doc)


def _doc(**changes) -> dict:
    doc = webhook([gpu_alert("prod", "gpu-node-1", 0, 0, starts_at=AT)], cluster="prod", node="gpu-node-1")
    alert = doc["alerts"][0]
    for key, value in changes.items():
        (alert if key in alert or key in ("endsAt", "fingerprint") else doc)[key] = value
    return doc


@pytest.mark.parametrize("changes", [
    {"endsAt": ""}, {"fingerprint": ""}, {"endsAt": None}, {"annotations": None}, {"truncatedAlerts": -1},
    {"truncatedAlerts": True}, {"version": 4}, {"status": "pending"}, {"startsAt": "2026-12-01 12:00:00Z"},
    {"fingerprint": "xyz"}, {"generatorURL": None},
])
def test_what_the_schema_refuses_is_refused_naming_the_field(changes):
    with pytest.raises(BadPayload) as refused:
        read_notification(json.dumps(_doc(**changes)).encode(), AT)
    assert refused.value.field != "document"
    _agree(_doc(**changes))


@pytest.mark.parametrize("changes", [{"truncatedAlerts": 1.0}, {"extraField": float("nan")},
                                     {"fingerprint": "abcdef\n"}])  # the schema's re.search lets $ match before \n
def test_what_only_msgspec_is_stricter_about_is_still_taken(changes):
    raw = json.dumps(_doc(**changes)).encode()
    with pytest.raises(msgspec.ValidationError if "truncatedAlerts" in changes else msgspec.DecodeError):
        wire.decode(raw)
    note = read_notification(raw, AT)
    assert len(note.alerts) == 1 and note.alerts[0].received_at == AT


@pytest.mark.parametrize("changes, field", [
    ({"startsAt": "2026-13-01T12:00:00Z"}, "alerts.0.startsAt"), ({"endsAt": "2026-02-30T00:00:00Z"}, "alerts.0.endsAt"),
    ({"startsAt": "0001-01-01T00:00:00Z"}, "alerts.0.startsAt"),
])
def test_the_receive_path_checks_the_calendar_without_building_alerts(changes, field):
    raw = json.dumps(_doc(**changes)).encode()
    with pytest.raises(BadPayload) as refused:
        read_notification(raw, AT, build=False)
    assert refused.value.field == field
    _agree(_doc(**changes))


def test_a_nul_escape_is_refused_by_name():
    raw = json.dumps(_doc(annotations={"summary": "bad \u0000 byte"})).encode()
    with pytest.raises(BadPayload, match="NUL or a lone UTF-16 surrogate") as refused:
        read_notification(raw, AT)
    assert refused.value.field == "alerts.0.annotations.summary"


@pytest.mark.parametrize("changes, field", [
    ({"startsAt": "2026-13-01T12:00:00Z"}, "alerts.0.startsAt"), ({"endsAt": "yesterday"}, "alerts.0.endsAt"),
    ({"version": "3"}, "version"), ({"status": "pending"}, "alerts.0.status"),
])
def test_a_stored_webhook_that_no_longer_reads_is_refused_naming_the_field(changes, field):
    """The engine's read skips the time pattern the receiver matched; a body stored by another version or damaged
    is still refused by name (and set aside by the engine)."""
    with pytest.raises(BadPayload) as refused:
        read_stored(json.dumps(_doc(**changes)).encode(), AT)
    assert refused.value.field == field


SCHEMA_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
TIMES = ["2026-12-01T12:00:00Z", "2026-12-01T12:00:00.123+01:00", "2026-12-01T12:00:00Z\n", "0001-01-01T00:00:00Z",
         "", "2026-12-01 12:00:00Z", "2026-12-01T12:00:00Z\x002026-12-01T12:00:00Z", "2026-12-01T12:00:00Z\n\n",
         "٢٠٢٦-12-01T12:00:00Z", "2026-12-01T12:00:00", "x2026-12-01T12:00:00Z"]


@given(starts=st.lists(st.sampled_from(TIMES), min_size=1, max_size=4),
       ends=st.lists(st.one_of(st.none(), st.sampled_from(TIMES)), min_size=4, max_size=4))
@settings(max_examples=300, deadline=None)
def test_one_search_over_all_times_agrees_with_the_schema_pattern_on_each(starts, ends):
    alerts = [wire.WireAlert(status="firing", labels={}, startsAt=s,
                             endsAt=msgspec.UNSET if e is None else e) for s, e in zip(starts, ends)]
    hook = wire.WireWebhook(version="4", status="firing", alerts=alerts)
    every = [a.startsAt for a in alerts] + [a.endsAt for a in alerts if isinstance(a.endsAt, str)]
    assert wire.times_match(hook) == all(SCHEMA_TIME.search(t) for t in every)
