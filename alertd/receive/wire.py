"""The webhook's shape as msgspec types: decoding and checking in one pass, off the Python interpreter.

These types declare the webhook: alertd/schemas/webhook.schema.json is generated from them
(alertd/receive/shapes.py), and the schema's path in alertd.receive.payload words a refusal from it. They
may be stricter than the schema (an integer written ``1.0``, ``NaN`` in an unknown field): such a document
falls back to that path (tests/unit/test_webhook_wire.py checks the two agree on generated documents). No
field is Optional: the schema refuses ``null`` everywhere.

A fingerprint's pattern is checked by ``stricter_than_schema`` after the decode, and the times by one search over
all of them (``times_match``), not by msgspec: msgspec calls Python's ``re`` once for every pattern-checked string,
which cost as much as decoding the rest of the alert. ``decode`` is all three together: what the receive path
relies on.
"""
from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from alertd.core.states import AlertStatus

# The schema's time pattern as ``re.search`` reads it: ``$`` also matches before a final newline.
TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\n?"
SEPARATOR = "\x00"  # never inside a time that matches TIME
TIMES = re.compile(rf"{TIME}(?:{SEPARATOR}{TIME})*")
HEX = "0123456789abcdefABCDEF"
MAX_FINGERPRINT = 32  # FINGERPRINT_PATTERN's
Status = AlertStatus  # decoded as the member: msgspec checks an Enum by its values as fast as a Literal
MAX_TRUNCATED = 2**53 - 1  # the schema's maximum: exact as a JSON number and as a float (the metric)


# The schema's patterns, checked in code (see the module's docstring), stated for the generated schema.
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
FINGERPRINT_PATTERN = f"^[0-9a-fA-F]{{1,{MAX_FINGERPRINT}}}$"
Time = Annotated[str, Meta(extra_json_schema={"pattern": TIME_PATTERN})]  # see times_match
Fingerprint = Annotated[str, Meta(extra_json_schema={"pattern": FINGERPRINT_PATTERN})]  # see stricter_than_schema
Labels = dict[str, str]


# Keyword-only, so the fields are in the schema's order: of several errors at one depth, the first is told.
class WireAlert(Struct, kw_only=True):
    status: Status
    labels: Labels
    annotations: Labels = {}
    startsAt: Time
    endsAt: Time | msgspec.UnsetType = msgspec.UNSET  # absent: not checked; an empty string is refused
    generatorURL: str = ""
    fingerprint: Fingerprint | msgspec.UnsetType = msgspec.UNSET  # absent: not checked


class WireWebhook(Struct, kw_only=True):
    """What Alertmanager's webhook_config POSTs. Unknown fields (notification_reason, routeLabels, ...) are
    accepted so newer Alertmanager releases keep working."""

    version: Annotated[Literal["4"], Meta(extra_json_schema={"type": "string"}, description=(
        'Webhook payload version: "4", the one version Alertmanager\'s webhook has (a string).'))]
    groupKey: str = ""
    truncatedAlerts: Annotated[int, Meta(ge=0, le=MAX_TRUNCATED, description=(
        "Alerts left out by max_alerts. At most 2^53-1: exact as a JSON number everywhere (and as a metric's "
        "float); more alerts than that cannot exist."))] = 0
    status: Status
    receiver: str = ""
    groupLabels: Labels = {}
    commonLabels: Labels = {}
    commonAnnotations: Labels = {}
    externalURL: str = ""
    alerts: list[WireAlert]


DECODER = msgspec.json.Decoder(WireWebhook)


class StoredAlert(Struct):
    """An alert of a webhook read back from the inbox log: checked on receipt, so its times are not matched
    against the pattern again (16 calls into Python's ``re`` per webhook of 8 alerts); they are still parsed."""

    status: Status
    labels: dict[str, str]
    startsAt: str
    annotations: dict[str, str] = {}
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str | msgspec.UnsetType = msgspec.UNSET


class StoredWebhook(Struct):
    """What the engine needs of a stored webhook; the fields only the receive path checks are skipped."""

    version: Literal["4"]
    status: Status
    alerts: list[StoredAlert]
    receiver: str = ""
    externalURL: str = ""


STORED_DECODER = msgspec.json.Decoder(StoredWebhook)


def stricter_than_schema(hook: WireWebhook | StoredWebhook) -> bool:
    """Whether a decoded webhook breaks a rule msgspec does not check: a fingerprint present but not 1 to 32
    hexadecimal digits. Stricter than the schema's pattern (which ``re.search`` lets end in a newline): such a
    webhook takes the schema's path, which judges it."""
    for a in hook.alerts:
        fp = a.fingerprint
        if fp is not msgspec.UNSET and not (0 < len(fp) <= MAX_FINGERPRINT and not fp.strip(HEX)):
            return True
    return False


def times_match(hook: WireWebhook) -> bool:
    """Whether every startsAt and every present endsAt matches the schema's pattern: one search over them all,
    joined by a separator no matching time holds (the count of separators proves none was inside a time)."""
    times = [a.startsAt for a in hook.alerts]
    times += [a.endsAt for a in hook.alerts if a.endsAt is not msgspec.UNSET]
    if not times:
        return True
    joined = SEPARATOR.join(times)
    return joined.count(SEPARATOR) == len(times) - 1 and TIMES.fullmatch(joined) is not None


def decode(raw: bytes) -> WireWebhook:
    """msgspec's decode and the checks it leaves to ``times_match`` and ``stricter_than_schema``;
    msgspec.ValidationError if any refuses."""
    hook = DECODER.decode(raw)
    if not times_match(hook):
        raise msgspec.ValidationError("a time is not an RFC 3339 date-time")
    if stricter_than_schema(hook):
        raise msgspec.ValidationError("fingerprint is not 1 to 32 hexadecimal digits")
    return hook
