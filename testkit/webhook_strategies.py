"""Hypothesis strategies for webhooks: documents the webhook JSON Schema describes, and a real
Alertmanager notification with fields replaced by what a sender could plausibly get wrong."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from alertd.receive.wire import TIME_PATTERN
from alertd.schemas import schema as load_schema
from testkit.webhooks import gpu_alert, webhook


def fuzz_alert(node: str, gpu: int, kind: int, status: str = "firing") -> dict:
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=3)
    return gpu_alert("prod", node, gpu, kind, starts_at=starts, status=status)


WEBHOOK = load_schema("webhook")
DEFS = WEBHOOK["$defs"]


def _from(spec: dict) -> st.SearchStrategy:
    """Values valid for one property of the webhook schema (its own enums and regular expressions)."""
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    if "const" in spec:
        return st.just(spec["const"])
    if spec.get("pattern") == TIME_PATTERN:  # the pattern, and real instants at any offset
        offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
        real = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets)
        return st.one_of(st.from_regex(TIME_PATTERN, fullmatch=True), real.map(lambda d: d.isoformat(timespec="seconds")),
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


def schema_shaped() -> st.SearchStrategy:
    return _from(WEBHOOK)


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
    alerts = [fuzz_alert(f"gpu-node-{draw(st.integers(0, 9))}", draw(st.integers(0, 7)), draw(st.integers(0, 8)),
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
        if not (isinstance(doc.get("alerts"), list) and doc["alerts"] and all(isinstance(a, dict) for a in doc["alerts"])):
            break
    return doc
