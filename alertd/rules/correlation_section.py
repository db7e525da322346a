"""The ``correlation`` section of the rule files declared once (correlation.schema.json is generated from it:
alertd/config/schemafiles.py): how alerts fold into incidents, storms, the response to a fault, the
watchdog, the job and the failure domains, with their defaults. alertd.rules.ruleset reads the decoded
section into the rules the engine takes."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Section, Span, written
from alertd.core.states import Severity
from alertd.core.vocabulary import Category, Detail as D, Group as GroupName, SignalKind as K, detail_is, signal_is
from alertd.rules.declared import Matchers, matchers
from alertd.rules.jobs import DomainRule, FieldName, Job
from alertd.rules.storm_says import Escalation, Reading

Name = Annotated[str, Meta(pattern="^[A-Za-z0-9_.-]+$")]


def span(text: str) -> Span:
    """A duration's default, as the file writes it."""
    return written(Span.from_config, text)


class Group(Section, frozen=True, kw_only=True, omit_defaults=True):
    name: Annotated[Name, Meta(description="Unique name, shown on incidents.")]
    match: Matchers = matchers()
    by: Annotated[tuple[FieldName, ...], Meta(description=(
        "Fields (labels or derived: cluster, node, origin (what a node-less alert points at), gpu, namespace, pod, "
        "container, signal, category, xid, switch (an SXid signal's NVSwitch), alertname, fingerprint) that form "
        "the incident key."))]
    allow_empty: Annotated[bool, Meta(description=(
        "Use this group even if some 'by' fields are empty. Default false (fall through to the next group)."))] = False


DEFAULT_GROUPS = (
    Group(name="application-xid", by=("cluster", "namespace", "pod"),
          match=matchers(signal_is(K.XID), f'category="{Category.APPLICATION}"')),
    Group(name="nvswitch", by=("cluster", "node", "switch"), match=matchers(signal_is(K.SXID))),
    Group(name="node", by=("cluster", "node"), match=matchers(signal_is(K.OTHER, negate=True))),
    Group(name="origin", by=("cluster", "origin"), match=matchers('node=""', signal_is(K.WATCHDOG, negate=True))),
    Group(name="node-unknown", by=("cluster", "alertname", "fingerprint"),
          match=matchers(signal_is(K.OTHER, K.WATCHDOG, negate=True), 'node=""')),
    Group(name=GroupName.OTHER.value, by=("alertname", "cluster", "node"), allow_empty=True),
)


class StormEventKind(Section, frozen=True, kw_only=True, omit_defaults=True):
    name: Annotated[Name, Meta(description="Unique name, part of the fleet incident's key.")]
    match: Annotated[Matchers, Meta(description=(
        "Matchers on the leading signal: signal, category, severity, xid, detail, cluster, node, group, and "
        "alertname (the name of the alert that shows the leading signal)."))] = matchers()
    by: Annotated[tuple[FieldName, ...], Meta(description=(
        "Fields of the leading signal that name one event, e.g. [cluster, category]; the same fields as match "
        "(alertd check warns about others: every node has '' there)."))]
    reading: Reading | None = None
    advice: Annotated[str, Meta(min_length=1, description=(
        "What to do about the storm as a whole, in words (the rack's cooling, not each GPU): shown with the fleet "
        "incident on its page and in Slack."))] = ""
    escalate: Annotated[tuple[Escalation, ...], Meta(min_length=1, description=(
        "The severity the storm's extent reaches, least severe step first: a fleet incident of the event spanning "
        "a step's nodes and GPUs (both, when both are given) is at least that severe, whatever its nodes' own "
        "severity, and routes (and pages) as such. Each step names nodes, GPUs or both, and must be more severe "
        "than the one before it and no smaller."))] = ()


DEFAULT_STORM_EVENTS = (
    StormEventKind(name="gpu-fault", by=("cluster", "category"), match=matchers(signal_is(K.XID, K.ECC, K.ROW_REMAP,
                                                                                          K.NVLINK))),
    StormEventKind(name="thermal", by=("cluster",), match=matchers(signal_is(K.THERMAL))),
    StormEventKind(name="node-lost", by=("cluster",), match=matchers(signal_is(K.METRICS_MISSING, K.NODE_NOT_READY))),
    StormEventKind(name="unclassified", by=("cluster", "alertname"), match=matchers(signal_is(K.OTHER))),
)


class Storm(Section, frozen=True):
    """Fold the node incidents of one fleet event (many nodes failing the same way within minutes) into one fleet
    incident."""

    enabled: Annotated[bool, Meta(description="Default true.")] = True
    min_nodes: Annotated[int, Meta(ge=2, description=(
        "Nodes with the same signal within the window that make a storm. Default 5."))] = 5
    window: Annotated[Span, Meta(description=(
        "How far apart in time the node incidents of one storm may open: a node opening within this long of the "
        "fleet's latest node joins it, and min_nodes nodes opening within it start one. Keep it above 2 x "
        "Alertmanager's group_interval plus its group_wait, so consecutive batches of one storm meet. Default "
        "15m."))] = span("15m")
    signals: Annotated[tuple[str, ...], Meta(description=(
        "Signal kinds that can lead a storm. Default: all but 'watchdog'."))] = ()
    events: Annotated[tuple[StormEventKind, ...], Meta(min_length=1, description=(
        "Ordered kinds of fleet event. A node incident's leading signal (its most severe, best-explaining one) is "
        "matched against them; the first match names the node's event by its 'by' fields. Node incidents of one "
        "event on min_nodes nodes within the window fold into ONE fleet incident. Default: gpu-fault (xid, ecc, "
        "row_remap, nvlink by cluster and category), thermal (by cluster), node-lost (metrics_missing, "
        "node_not_ready by cluster), unclassified (other: alerts alertd cannot classify, by cluster and "
        "alertname, as Alertmanager's grouping by name would send them). A node showing only a cordon is no "
        "event: a cordon is a person's decision (planned work, or a fault alertd has not seen), not a "
        "fault."))] = DEFAULT_STORM_EVENTS
    pending: Annotated[Span, Meta(description=(
        "How long a node incident that may still fold into a fleet is marked storm pending: its event (see "
        "events) has other node incidents opened within this time before it, still fewer than min_nodes (the "
        "first of them is not held). Routing holds the incident's first post and page while the mark stands (it "
        "is stored with the incident, so a restart or a new leader holds it too), and a fleet forming meanwhile "
        "takes it in. Set it a little above your Alertmanager's group_interval (5m10s for 5m): the next batch of "
        "a storm arrives then. Never past the window. The price: an unrelated fault of the same event on the "
        "cluster within this time is posted and paged that late. Default 5m10s; 0s: no hold."))] = span("5m10s")
    page_updates: Annotated[Span, Meta(description=(
        "A fleet incident that grows tells its pages the new node count (PagerDuty: a repeated trigger on the "
        "same alert, which updates its summary and pages no one again) at most this often, and only when it "
        "grew: growth sooner than this is told when the time is up, with the count of then. An acknowledged or "
        "resolved fleet tells pagers nothing. Its Slack thread hears of each doubling at once (8, 16, 32 nodes), "
        "whatever this says. Default 5m; 0s: never update a page."))] = span("5m")
    followers: Annotated[Matchers, Meta(description=(
        "Signals that follow a fault on the node itself (its exporter dies with the GPU, the node goes NotReady). "
        "A fleet incident also stands for the events these signals would name on its nodes, so a node incident "
        "led by one of them joins it instead of starting a fleet of its own. A cordon is no follower: a node "
        "only cordoned (planned work) never joins a storm. Default: "
        "signal=~\"metrics_missing|node_not_ready\"."))] = matchers(signal_is(K.METRICS_MISSING, K.NODE_NOT_READY))


class Response(Section, frozen=True):
    """The response belongs to the fault: a cordon, drain, reboot (NodeDown), NotReady or uncordon on a node after
    its fault, by a person, alertd's remediation or another remediator, joins the fault's incident (and its
    fleet), even after the fault's alerts resolved, and never pages on its own. A repair that fails pages once."""

    signals: Annotated[Matchers, Meta(description=(
        "A node's repair symptoms: signals that are a response when they start after a fault on the node. They "
        "join the fault's incident and timeline, may raise its severity, but never take its headline (title and "
        "primary stay with the fault). Default: signal=~\"node_cordoned|node_not_ready|metrics_missing\", "
        "detail=~\"|exporter_down|node_down\"."))] = matchers(
        signal_is(K.NODE_CORDONED, K.NODE_NOT_READY, K.METRICS_MISSING), detail_is("", D.EXPORTER_DOWN, D.NODE_DOWN))
    window: Annotated[Span, Meta(description=(
        "How long after the fault's last alert ended a repair symptom that starts is still the response to it (it "
        "reopens the fault's resolved incident that long). Keep it within the store's 6h reopen lookback. "
        "Default 3h."))] = span("3h")
    repair_timeout: Annotated[Span, Meta(description=(
        "A node back from its reboot in response to a fault (reachable again) that still shows still_down "
        "(NotReady, no metrics) this long after it came back: the repair failed, and the incident pages once, "
        "saying so. Measured from the node's return, not from the reboot, so a long power-off for a swap is not a "
        "failed repair. A fault signal back after the uncordon is a failed repair too. Default 20m (longer than "
        "the GPU Operator takes to bring a rebooted node's driver and exporter back); 0s: never judge a node not "
        "ready."))] = span("20m")
    still_down: Annotated[Matchers, Meta(description=(
        "What a node not back yet after its reboot shows (down or not ready). Default: "
        "signal=~\"metrics_missing|node_not_ready\", detail=~\"|node_down\"."))] = matchers(
        signal_is(K.METRICS_MISSING, K.NODE_NOT_READY), detail_is("", D.NODE_DOWN))
    unreachable: Annotated[Matchers, Meta(description=(
        "Of the still_down signals, those that say the node is unreachable (down, rebooting or powered off), "
        "judged by down_timeout. Default: signal=\"metrics_missing\", detail=\"node_down\"."))] = matchers(
        signal_is(K.METRICS_MISSING), detail_is(D.NODE_DOWN))
    down_timeout: Annotated[Span, Meta(description=(
        "A node unreachable (unreachable) this long in response to a fault: the repair failed, and the incident "
        "pages once. A reboot takes minutes, a power-off for a swap an hour or two. Default 3h; 0s: never judge a "
        "node down."))] = span("3h")


class WatchdogRule(Section, frozen=True):
    """Heartbeat alerts of the alerting pipeline (Alertmanager's Watchdog)."""

    alertnames: Annotated[tuple[str, ...], Meta(min_length=1, description="Default [Watchdog].")] = ("Watchdog",)
    timeout: Annotated[Span, Meta(description=(
        "Silence longer than this opens a critical 'alerting pipeline silent' incident. Default 10m."))] = span("10m")
    severity: Annotated[Severity, Meta(description=(
        "Severity of the 'alerting pipeline silent' incident. Default critical."))] = Severity.CRITICAL


class Correlation(Section, frozen=True):
    """How alerts fold into incidents."""

    hold_down: Annotated[Span, Meta(description=(
        "An incident whose alerts are all resolved stays open this long (flap protection) before it resolves. "
        "Default 5m."))] = span("5m")
    reopen_window: Annotated[Span, Meta(description=(
        "An incident whose key fires again within this long after its last alert ended (by the alerts' startsAt "
        "and endsAt) is reopened (the same incident, counted as a flap) instead of a new one. 0s: never. Default "
        "1h."))] = span("1h")
    fold_window: Annotated[Span, Meta(description=(
        "A fallout Xid (fold_into_previous in the catalog, e.g. 45) joins the Xid incident on the same node seen "
        "within this window. Default 10m."))] = span("10m")
    groups: Annotated[tuple[Group, ...], Meta(min_length=1, description=(
        "Ordered; the first group whose matchers match and whose 'by' fields are all present decides the incident "
        "key."))] = DEFAULT_GROUPS
    storm: Storm = msgspec.field(default_factory=Storm)
    response: Response = msgspec.field(default_factory=Response)
    watchdog: WatchdogRule = msgspec.field(default_factory=WatchdogRule)
    job: Job = msgspec.field(default_factory=Job)
    domains: DomainRule = msgspec.field(default_factory=DomainRule)


__all__ = ["DEFAULT_GROUPS", "DEFAULT_STORM_EVENTS", "Correlation", "Group", "Response", "Storm", "StormEventKind",
           "WatchdogRule"]
