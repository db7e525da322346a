"""The ``signals`` section (rules/signals.yml) declared once: which kind of GPU problem an alert reports.

alertd/rules/ruleset.py turns the decoded entries into SignalRules (matchers parsed, positions kept)."""
from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import Meta

from alertd.core.sections import Section
from alertd.core.vocabulary import RULED_CATEGORIES, Category, MISSING_DETAILS, RULED_KINDS, Detail, SignalKind
from alertd.schemas.declared import (DETAIL_PATTERN, RUNBOOK_PATTERN, SEVERITY_WORDS, MatcherText, RuleFile,
                                     in_order, matcher_def, word)


class SignalEntry(Section, frozen=True):
    """One classification rule."""

    SCHEMA: ClassVar[dict[str, object]] = {"allOf": [
        {"if": {"properties": {"kind": {"const": SignalKind.METRICS_MISSING.value}}, "required": ["kind"]},
         "then": {"required": ["detail"], "properties": {"detail": {"enum": list(in_order(Detail, MISSING_DETAILS))}}},
         "description": "metrics_missing rules must say what is missing."},
        {"if": {"properties": {"kind": {"const": SignalKind.OTHER.value}}, "required": ["kind"]},
         "then": {"not": {"required": ["detail"]}},
         "description": "kind other declares alerts not GPU health: it takes no detail."},
    ]}

    kind: Annotated[str, word(in_order(SignalKind, RULED_KINDS), (
        "The signal kind. For 'xid' the code comes from the alert's xid label and the rest from the Xid catalog. "
        "For 'sxid' (an NVSwitch fault, e.g. a log alert) the SXid line is read from the annotation text or a "
        "label value and the rest comes from the SXid catalog. 'other' declares the alerts not GPU health "
        "(utilization, cost, capacity rules): evidence is not consulted and `alertd check --prometheus-rules` "
        "does not warn that they look like GPU alerts. 'job_stalled' (every GPU of a running job idle after "
        "being busy) and 'straggler' (one GPU well below its job's median) fold into the job's incident "
        "(correlation.job); 'gpu_quiet' (a GPU's telemetry stale while its node's other GPUs report) and "
        "'link_degraded' (PCIe replays, a link's traffic collapsed, an InfiniBand port down or flapping) are "
        "node signals, and suspects of a stalled job on their node."))]
    match: Annotated[tuple[MatcherText, ...], Meta(
        min_length=1, description="Matchers that must all match the alert's labels (AND).")]
    detail: Annotated[str, Meta(pattern=DETAIL_PATTERN, description=(
        "Refines the kind, e.g. for metrics_missing: exporter_down (exporter down, node alive), node_down (node "
        "unreachable) gpu_missing (a GPU vanished) or gpu_unusable (GPU pods rejected on a Ready node; titled by "
        "the alert's summary). Shown in the incident title."))] = ""
    severity: Annotated[str, word(SEVERITY_WORDS, (
        "The severity when the alert carries no usable severity label; the alert's own label wins."))] = ""
    category: Annotated[str, word(in_order(Category, RULED_CATEGORIES), (
        "Who most likely owns the problem (same vocabulary as the Xid catalog). Ignored for kind xid, whose "
        "category comes from the catalog."))] = ""
    runbook: Annotated[str, Meta(pattern=RUNBOOK_PATTERN, description=(
        "Runbook page name under runbooks/, without the .md suffix."))] = ""


class SignalsFile(Section, frozen=True):
    """Ordered rules (rules/signals.yml) that decide which kind of GPU problem an alert reports. The first rule
    whose matchers all match wins; an alert matching none is kind 'other'."""

    signals: Annotated[tuple[SignalEntry, ...], Meta(min_length=1, description=(
        "Classification rules in priority order. Lists from several rule files are concatenated in file order."))]


SIGNALS = RuleFile("signals", "alertd signal classification", SignalsFile, {SignalEntry: "rule"}, {
    "matcher": matcher_def(
        "One Alertmanager-style matcher: label name, operator (=, !=, =~, !~) and a double-quoted value, e.g. "
        "alertname=~\"GPUXidError|DCGMXidErrors\". Regexes are anchored; a missing label matches as the empty "
        "string.")})

__all__ = ["SIGNALS", "SignalEntry", "SignalsFile"]
