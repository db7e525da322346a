"""Alertmanager webhook v4: bytes in, alerts out, or an error naming the field."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

import fastjsonschema

from alertd.model import Alert, parse_iso
from alertd.schemas import describe, schema, validator

ZERO_TIME_PREFIX = "0001-01-01"


class BadPayload(ValueError):
    """Input that can never become valid: answered with 400 so Alertmanager does not retry."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field
        self.reason = "schema" if field else "json"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": str(self)}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(slots=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    external_url: str
    truncated: int
    alerts: list[Alert]


def decode_body(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadPayload(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadPayload(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def fingerprint_of(labels: dict[str, str]) -> str:
    """Alertmanager always sends a fingerprint; senders that do not get a stable one from labels."""
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:16]


@functools.cache
def fast_validator() -> Callable[[Any], Any]:
    """The webhook schema compiled to Python: ~25x faster than interpreting it, on the hot path.

    The schema only uses keywords that mean the same in draft 7, which
    fastjsonschema compiles; jsonschema still explains rejected input.
    """
    compiled = dict(schema("webhook"), **{"$schema": "http://json-schema.org/draft-07/schema#"})
    return fastjsonschema.compile(compiled)


def parse_notification(doc: Any, received_at: datetime) -> Notification:
    try:
        fast_validator()(doc)
    except fastjsonschema.JsonSchemaValueException as fast:  # the slow, message-building path only for bad input
        errors = list(validator("webhook").iter_errors(doc))
        if not errors:  # the two validators disagree: still refuse, with the compiled one's words
            raise BadPayload(fast.message, ".".join(fast.path[1:]) or "document") from None
        error = min(errors, key=lambda e: len(e.absolute_path))
        path = ".".join(str(p) for p in error.absolute_path)
        raise BadPayload(describe(error), path or "document") from None
    receiver = doc.get("receiver", "")
    external_url = doc.get("externalURL", "")
    alerts = []
    for item in doc["alerts"]:
        ends_raw = item.get("endsAt") or ""
        labels = item["labels"]
        alerts.append(
            Alert(
                fingerprint=(item.get("fingerprint") or fingerprint_of(labels)).lower(),
                status=item["status"],
                labels=labels,
                annotations=item.get("annotations") or {},
                starts_at=parse_iso(item["startsAt"]),  # type: ignore[arg-type]
                ends_at=None if not ends_raw or ends_raw.startswith(ZERO_TIME_PREFIX) else parse_iso(ends_raw),
                generator_url=item.get("generatorURL", ""),
                receiver=receiver,
                external_url=external_url,
                received_at=received_at,
            )
        )
    return Notification(
        receiver=receiver,
        status=doc["status"],
        group_key=doc.get("groupKey", ""),
        external_url=external_url,
        truncated=int(doc.get("truncatedAlerts") or 0),
        alerts=alerts,
    )


def delivery_key(alert: Alert) -> str:
    """Idempotency key: a retry or an HA peer's copy of the same alert state has the same key."""
    return f"{alert.fingerprint}|{alert.starts_at.timestamp():.3f}|{alert.status}"
