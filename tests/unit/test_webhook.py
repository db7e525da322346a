import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alertd.receive.payload import BadPayload, decode_body, delivery_key, parse_notification, read_notification

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "webhook-gpu-node.json"
NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def doc():
    return json.loads(EXAMPLE.read_text())


def test_example_parses_and_firing_end_is_none():
    note = parse_notification(doc(), NOW)
    assert note.receiver == "alertd" and len(note.alerts) == 3
    a = note.alerts[0]
    assert a.ends_at is None and a.starts_at.tzinfo is not None
    assert a.fingerprint == "5e3c1a9f0b7d2e41"


def test_unknown_fields_are_accepted():
    d = doc()
    d["notification_reason"] = "repeat"
    d["routeLabels"] = {"x": "y"}
    d["alerts"][0]["somethingNew"] = 1
    assert len(parse_notification(d, NOW).alerts) == 3


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.pop("version"), "document"),
    (lambda d: d.update(version="3"), "version"),
    (lambda d: d.update(alerts={}), "alerts"),
    (lambda d: d["alerts"][1]["labels"].update(gpu=3), "alerts.1.labels.gpu"),
    (lambda d: d["alerts"][2].pop("startsAt"), "alerts.2"),
    (lambda d: d["alerts"][0].update(startsAt="yesterday"), "alerts.0.startsAt"),
    (lambda d: d["alerts"][0].update(status="pending"), "alerts.0.status"),
])
def test_invalid_payloads_name_the_field(mutate, field):
    d = doc()
    mutate(d)
    with pytest.raises(BadPayload) as exc:
        parse_notification(d, NOW)
    assert exc.value.field == field, str(exc.value)


def test_non_utf8_and_malformed_json():
    with pytest.raises(BadPayload, match="UTF-8"):
        decode_body(b'{"version": "4\xff"}')
    with pytest.raises(BadPayload, match="malformed JSON.*line 1"):
        decode_body(b'{"version": ')


def test_delivery_key_is_stable_across_redelivery_and_changes_with_status():
    a, b = parse_notification(doc(), NOW).alerts[0], parse_notification(doc(), NOW).alerts[0]
    assert delivery_key(a) == delivery_key(b)
    b.status = "resolved"
    assert delivery_key(a) != delivery_key(b)


def test_missing_fingerprint_is_derived_from_labels():
    d = doc()
    del d["alerts"][0]["fingerprint"]
    x = parse_notification(d, NOW).alerts[0]
    y = parse_notification(d, NOW).alerts[0]
    assert x.fingerprint == y.fingerprint and len(x.fingerprint) == 16


@pytest.mark.parametrize("truncated", [2**53, 10**30, 10**400], ids=["2^53", "10^30", "10^400"])
def test_truncated_alerts_beyond_any_real_count_are_refused_before_anything_is_stored(truncated):
    """A count no Alertmanager can send, refused on both paths (a stored webhook whose answer then failed
    would be retried by Alertmanager forever)."""
    d = doc()
    d["truncatedAlerts"] = truncated
    with pytest.raises(BadPayload) as exc:
        parse_notification(d, NOW)
    assert exc.value.field == "truncatedAlerts", str(exc.value)
    with pytest.raises(BadPayload) as exc:
        read_notification(json.dumps(d).encode(), NOW, build=False)
    assert exc.value.field == "truncatedAlerts", str(exc.value)
    d["truncatedAlerts"] = 2**53 - 1
    assert read_notification(json.dumps(d).encode(), NOW, build=False).truncated == 2**53 - 1


@pytest.mark.parametrize("version, said", [
    ("3", 'version: got "3", accepted only "4"'),
    (4, 'version: got 4 (not a string), accepted only "4"'),  # a hand-written sender's number
])
def test_a_wrong_version_says_what_came_and_what_is_accepted(version, said):
    d = doc()
    d["version"] = version
    for read in (lambda: parse_notification(d, NOW), lambda: read_notification(json.dumps(d).encode(), NOW)):
        with pytest.raises(BadPayload) as err:
            read()
        assert str(err.value) == said
