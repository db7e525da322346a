"""The ``routing`` section of the rule files declared once (routing.schema.json is generated from it:
alertd/config/schemafiles.py). A receiver's integration sections are not declared here: each integration
declares its own (``receiver_schema``, gathered by alertd.integrations.registry.receiver_parts) and reads its own
part of the document. alertd.rules.routing reads the decoded section into the rules routing takes."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal, Self

import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, Span, written
from alertd.core.states import Severity
from alertd.core.vocabulary import Detail as D, SignalKind as K, detail_is, signal_is
from alertd.integrations import registry
from alertd.integrations.pagerduty import ROUTING_KEY
from alertd.rules.declared import Matchers, matchers


class Defined(str):
    """Text of a form the schema file defines once (``$defs``) and refers to."""

    DEF: ClassVar[str] = ""

    @classmethod
    def from_config(cls, value: str) -> Self:
        return cls(value)

    @classmethod
    def config_schema(cls) -> dict[str, object]:
        return {"$ref": f"#/$defs/{cls.DEF}"}


class Name(Defined):
    """A receiver's or a window's name."""

    DEF = "name"


class KeyRef(Defined):
    """``${name}``: a key's name from the service config."""

    DEF = "key_ref"


class Written:
    """A value the parser reads with its own words (a time of day, an instant): held as the file has it."""

    def __init__(self, raw: str | int | datetime):
        self.raw = raw

    @classmethod
    def from_config(cls, value: str | int | datetime) -> "Written":
        return cls(value)


class TimeOfDay(Written):
    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"type": ["string", "integer"]}


class Instant(Written):
    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"$ref": "#/$defs/instant"}


def span(text: str) -> Span:
    return written(Span.from_config, text)


class Receiver(Section, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """A name and one section per integration (each integration declares its own: alertd.integrations.registry)."""

    SCHEMA: ClassVar[dict[str, object]] = {"properties": registry.receiver_parts(), "additionalProperties": False}

    name: Name


class Escalate(Section, frozen=True, kw_only=True):
    """Page this routing key too when the incident is not acknowledged in time; noted in the Slack thread."""

    after: Annotated[Span, Meta(description="Default 15m.")] = span("15m")
    routing_key: KeyRef


class RouteRule(Section, frozen=True, kw_only=True):
    name: Annotated[str, Meta(description="Shown in logs and on the message.")] = ""
    match: Matchers = matchers()
    receiver: Name = msgspec.field(default_factory=Name)
    owners: Annotated[bool, Meta(description=(
        "Send to the owning team's receiver (see owners); receiver is the fallback."))] = False
    continue_: Annotated[bool, Meta(description="Keep matching later routes. Default false.")] = \
        msgspec.field(default=False, name="continue")
    mute: Annotated[tuple[Name, ...], Meta(description="Mute windows during which this route stays quiet.")] = ()
    active: Annotated[tuple[Name, ...], Meta(description="Windows outside of which this route stays quiet.")] = ()
    escalate: Escalate | None = None


class TimeRangeRule(Section, frozen=True, kw_only=True):
    start: Annotated[TimeOfDay, Meta(description="\"HH:MM\" local time.")]
    end: Annotated[TimeOfDay, Meta(description="\"HH:MM\", exclusive; an end before the start wraps past midnight.")]


class MuteWindow(Section, frozen=True, kw_only=True):
    name: Name
    time_zone: Annotated[str, Meta(description="IANA zone, e.g. Europe/Berlin. Default UTC.")] = "UTC"
    weekdays: Annotated[tuple[str, ...], Meta(description=(
        "monday..sunday or ranges like monday:friday. Default every day."))] = ()
    times: tuple[TimeRangeRule, ...] = ()


class MaintenanceRule(Section, frozen=True, kw_only=True):
    name: str = ""
    nodes: Annotated[tuple[str, ...], Meta(description="Node names or glob patterns (gpu-r7-*).")] = ()
    clusters: tuple[str, ...] = ()
    match: Matchers = matchers()
    start: Instant
    end: Instant


class PendingRule(Section, frozen=True, kw_only=True):
    match: Matchers
    lag: Span = msgspec.field(name="for")


def _pending() -> tuple[PendingRule, ...]:
    """How long an alert's startsAt lags the moment its condition began: its rule's `for:` in
    deploy/prometheus/gpu-alerts.yml (DCGMExporterDown 5m, NodeDown 2m, KubeNodeNotReady 2m)."""
    lag = Span.from_config
    return (PendingRule(match=matchers(signal_is(K.METRICS_MISSING), detail_is(D.EXPORTER_DOWN)), lag=lag("5m")),
            PendingRule(match=matchers(signal_is(K.METRICS_MISSING), detail_is(D.NODE_DOWN)), lag=lag("2m")),
            PendingRule(match=matchers(signal_is(K.NODE_NOT_READY)), lag=lag("2m")))


class Cordoned(Section, frozen=True, kw_only=True):
    """Planned work: what a node shows after it was cordoned (not ready, node or exporter down) is downgraded or
    muted, judged per alert by when it really started; a fault signal is never planned."""

    action: Annotated[Literal["mute", "downgrade", "notify"], Meta(description="Default downgrade.")] = "downgrade"
    severity: Annotated[Severity, Meta(description=(
        "Severity routes see after a downgrade. Default info."))] = Severity.INFO
    # Signals a node being worked on shows: planned when they really start after its cordon. A fault signal
    # (Xid, ECC, thermal, a GPU missing after the reboot) is never planned.
    expected: Annotated[tuple[Matchers, ...], Meta(description=(
        "What a node being worked on shows: an alert matching any of these matcher lists that really starts "
        "after the cordon is planned work. Anything else (Xid, ECC, thermal, a GPU missing) is a fault and is "
        "never planned. Default: node_cordoned, node_not_ready and other signals, and metrics_missing with detail "
        "exporter_down or node_down."))] = (
        matchers(signal_is(K.NODE_CORDONED, K.NODE_NOT_READY, K.OTHER)),
        matchers(signal_is(K.METRICS_MISSING), detail_is(D.EXPORTER_DOWN, D.NODE_DOWN)))
    pending: Annotated[tuple[PendingRule, ...], Meta(description=(
        "How long after its condition began an alert fires (its Prometheus rule's for:), so the cordon is "
        "compared with when things really started. The first entry that matches an alert counts; none: 0s. "
        "Default: the shipped rules' (exporter down 5m, node down 2m, not ready 2m)."))] = \
        msgspec.field(default_factory=_pending)


class Owners(Section, frozen=True, kw_only=True):
    """How a route with owners: true finds the job's team."""

    labels: Annotated[tuple[str, ...], Meta(description=(
        "Alert (pod) labels naming the team, tried in order. Default [team, label_team, owner, label_owner]."))] = \
        ("team", "label_team", "owner", "label_owner")
    namespaces: Annotated[dict[str, str], Meta(description="Namespace (glob) -> team.")] = \
        msgspec.field(default_factory=dict)
    teams: Annotated[dict[str, str], Meta(description=(
        "Team -> receiver name. A team without an entry uses the receiver of the same name, if any."))] = \
        msgspec.field(default_factory=dict)
    default: Annotated[str, Meta(description="Receiver when no team is found.")] = ""
    use_channels: Annotated[bool, Meta(description=(
        "Send to a Slack channel the owner names itself (enrichment's owners[].channel, from a workload or "
        "namespace annotation) when its team has no receiver. Default false."))] = False


class RoutingSection(Section, frozen=True, kw_only=True):
    """Who hears about which incident: receivers, ordered routes, mute and maintenance windows, cordon handling,
    job owners."""

    receivers: Annotated[tuple[Receiver, ...], Meta(min_length=1)]
    routes: Annotated[tuple[RouteRule, ...], Meta(description=(
        "Ordered; the first route whose matchers all match takes the incident, unless it says continue: "
        "true."))] = ()
    labels: Annotated[tuple[Annotated[str, Meta(pattern="^[A-Za-z_][A-Za-z0-9_]*$")], ...], Meta(description=(
        "The site's own alert labels that routes match on (e.g. rack, team_oncall), besides the incident fields "
        "and the labels of the exporters alertd knows. alertd check refuses a matcher on a field no incident has "
        "when it looks like a typo of one that does, and warns about other names not declared here."))] = ()
    group_wait: Annotated[Span, Meta(description=(
        "How long the first post and page of a new node incident wait, so a storm forming meanwhile folds it into "
        "one fleet incident (which posts at once) instead of it being posted alone. Later changes are not held. 0 "
        "turns it off. Default 2s."))] = span("2s")
    storm_wait: Annotated[Span | None, Meta(extra_json_schema={"deprecated": True}, description=(
        "Deprecated: an older name of correlation.storm.pending, to which it is mapped with a warning (ignored "
        "when correlation.storm.pending is set). The engine alone decides storms: routing holds a node "
        "incident's first post and page only while the engine marks it storm pending."))] = None
    default_receiver: Annotated[Name, Meta(description=(
        "For incidents no route matches. Default: none (not notified)."))] = msgspec.field(default_factory=Name)
    mute_windows: tuple[MuteWindow, ...] = ()
    maintenance: tuple[MaintenanceRule, ...] = ()
    cordoned: Cordoned = msgspec.field(default_factory=Cordoned)
    owners: Owners = msgspec.field(default_factory=Owners)


ROUTING_DEFS: JSONObject = {
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
    "key_ref": ROUTING_KEY.schema(),  # an escalation's
    "instant": {"not": {"type": ["array", "object", "boolean", "null", "number"]},
                "description": "RFC 3339 time with offset, e.g. 2025-03-01T08:00:00Z."},
}
DECLARED_CORDONED = Cordoned()
DECLARED_OWNERS = Owners()

__all__ = ["DECLARED_CORDONED", "DECLARED_OWNERS", "ROUTING_DEFS", "Escalate", "Instant", "KeyRef", "Name",
           "RoutingSection", "TimeOfDay"]
