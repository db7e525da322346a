"""The webhook's shape as msgspec types: decoding and checking in one pass, off the Python interpreter.

These types say what alertd/schemas/webhook.schema.json says, never less: a
document they take, the schema takes too (tests/unit/test_webhook_wire.py
checks the two agree on generated documents). They may be stricter (an
integer written ``1.0``, ``NaN`` in an unknown field): such a document falls
back to the schema's own path in alertd.receive.payload. No field is Optional:
the schema refuses ``null`` everywhere.
"""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

# The same patterns as the schema's; both are searched (re.search) the same way.
Timestamp = Annotated[str, Meta(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")]
Fingerprint = Annotated[str, Meta(pattern=r"^[0-9a-fA-F]{1,32}$")]
Status = Literal["firing", "resolved"]
MAX_TRUNCATED = 2**53 - 1  # the schema's maximum: exact as a JSON number and as a float (the metric)


class WireAlert(Struct):
    status: Status
    labels: dict[str, str]
    startsAt: Timestamp
    annotations: dict[str, str] = {}
    endsAt: Timestamp = ""  # absent (a default is not checked); an empty string is refused, as by the schema
    generatorURL: str = ""
    fingerprint: Fingerprint = ""


class WireWebhook(Struct):
    version: Literal["4"]
    status: Status
    alerts: list[WireAlert]
    groupKey: str = ""
    truncatedAlerts: Annotated[int, Meta(ge=0, le=MAX_TRUNCATED)] = 0
    receiver: str = ""
    groupLabels: dict[str, str] = {}
    commonLabels: dict[str, str] = {}
    commonAnnotations: dict[str, str] = {}
    externalURL: str = ""


DECODER = msgspec.json.Decoder(WireWebhook)
