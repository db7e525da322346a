"""Alert -> Signal, from the rules' data: what kind of GPU problem this is."""
from __future__ import annotations

from alertd.gpu.clocks import decode_clock_events
from alertd.matchers import match_all
from alertd.model import SEVERITIES, Alert, Signal
from alertd.receive.normalize import NormalizeConfig, xid_of
from alertd.rules import RuleSet

KIND_TITLES = {
    "thermal": "GPU clocks throttled",
    "ecc": "GPU uncorrectable ECC errors",
    "row_remap": "GPU memory row remapping",
    "nvlink": "NVLink errors",
    "metrics_missing": "GPU metrics missing",
    "node_cordoned": "Node cordoned",
    "node_not_ready": "Node not ready",
    "watchdog": "Alerting pipeline heartbeat",
}
DETAIL_TITLES = {
    "exporter_down": "GPU metrics missing: dcgm-exporter down",
    "node_down": "Node down: no metrics from the node",
    "gpu_missing": "GPU missing from the node",
}
_SEVERITY_ALIASES = {"high": "error", "page": "critical", "warn": "warning", "low": "info", "none": "info", "notice": "info"}


def severity_label(value: str | None) -> str:
    if not value:
        return ""
    v = value.strip().lower()
    v = _SEVERITY_ALIASES.get(v, v)
    return v if v in SEVERITIES else ""


def classify(alert: Alert, rules: RuleSet, ncfg: NormalizeConfig) -> Signal:
    labels = alert.labels
    rule = next((r for r in rules.signals if match_all(r.matchers, labels)), None)
    kind = rule.kind if rule else "other"
    if kind == "xid":
        code = xid_of(alert, ncfg)
        if code is not None:
            return rules.catalog.lookup(code).signal()
        kind = "other"  # an Xid alert without a readable code still flows, unclassified
    severity = severity_label(labels.get("severity")) or (rule.severity if rule else "") or "warning"
    detail = rule.detail if rule else ""
    if kind == "thermal":
        raw = labels.get("clock_event_reasons") or alert.annotations.get("clock_event_reasons")
        harmful, benign = decode_clock_events(raw)
        if harmful:
            detail = ",".join(harmful)
        elif benign:  # idle / power cap only: the GPU is fine, the alert still flows as information
            kind, severity, detail = "other", "info", ",".join(benign)
    title = DETAIL_TITLES.get(detail) or KIND_TITLES.get(kind) or alert.annotations.get("summary") or alert.name or "alert"
    return Signal(
        kind=kind,
        severity=severity,
        category=(rule.category if rule and rule.category else ("hardware" if kind != "other" else "other")),
        title=title,
        meaning=alert.annotations.get("description", ""),
        runbook=(rule.runbook if rule else "") or alert.annotations.get("runbook_url", ""),
        detail=detail,
    )
