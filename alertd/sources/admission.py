"""GPU pods rejected at admission on a Ready node: the silent "fell off the bus" fault, counted per node.

A GPU the kubelet's device manager still counts but cannot hand out makes every GPU pod sent to the
node fail admission (``UnexpectedAdmissionError``), while the node stays Ready and no exporter rule
fires. One rejection is noise (a race at a restart); ``min_pods`` on one node within ``window`` is
a node whose GPU is unusable. The alert waits ``settle`` after the threshold so a burst is counted
whole, names the pods' jobs, and resolves once ``window`` passes with no rejection.

Pure: rejections and a clock in, alerts out. Memory: at most ``max_pods`` pods per node, and only
nodes with a rejection in the window.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from alertd.core.model import RESOLVED, iso
from alertd.rules.kube_health import AdmissionRule
from alertd.sources.kube_alerts import SOURCE, Wire, wire

MAX_JOBS_SHOWN = 20


@dataclass
class Burst:
    """One node's rejections since the first of this burst."""

    first: datetime
    last: datetime
    pods: OrderedDict[str, str] = field(default_factory=OrderedDict)  # namespace/pod -> its job
    reached: datetime | None = None  # when min_pods was reached
    raised: Wire | None = None  # the firing alert sent, for its resolution
    message: str = ""


class AdmissionTracker:
    def __init__(self, rule: AdmissionRule, cluster: str = ""):
        self.rule, self.cluster = rule, cluster
        self.bursts: dict[str, Burst] = {}

    def rejected(self, node: str, pod: str, job: str, at: datetime, message: str) -> None:
        """One pod the kubelet rejected on ``node`` at ``at`` (its Event's time)."""
        burst = self.bursts.get(node)
        if burst is None or (at - burst.last > self.rule.window and burst.raised is None):
            burst = self.bursts[node] = Burst(first=at, last=at)
        burst.last = max(burst.last, at)
        burst.pods[pod] = job
        burst.pods.move_to_end(pod)
        while len(burst.pods) > self.rule.max_pods:
            burst.pods.popitem(last=False)
        burst.message = message
        if burst.reached is None and len(burst.pods) >= self.rule.min_pods:
            burst.reached = at

    def due(self, now: datetime, ready: dict[str, bool | None]) -> list[Wire]:
        """Alerts due at ``now``: a burst past its settle time on a node that is Ready fires; a fired burst with
        no rejection for ``window`` resolves; an unfired one that old is forgotten."""
        out: list[Wire] = []
        for node, burst in list(self.bursts.items()):
            if now - burst.last > self.rule.window:
                if burst.raised is not None:
                    out.append(dict(burst.raised, status=RESOLVED.value, endsAt=iso(burst.last + self.rule.window)))
                del self.bursts[node]
            elif burst.raised is None and burst.reached is not None and now - burst.reached >= self.rule.settle \
                    and ready.get(node) is not False:
                burst.raised = self.alert(node, burst)
                out.append(burst.raised)
        return out

    def alert(self, node: str, burst: Burst) -> Wire:
        count = len(burst.pods)
        jobs = sorted({job for job in burst.pods.values() if job})
        labels = {"alertname": self.rule.alertname, "source": SOURCE, "node": node, "producer": "kubelet",
                  "severity": self.rule.severity}
        if self.cluster:
            labels["cluster"] = self.cluster
        shown = ", ".join(jobs[:MAX_JOBS_SHOWN]) + (f" and {len(jobs) - MAX_JOBS_SHOWN} more" if len(jobs) > MAX_JOBS_SHOWN else "")
        summary = f"GPU unusable: {count} GPU pods rejected on a Ready node"
        description = (f"{count} pods asking for a GPU were rejected at admission on {node}, which reports Ready, "
                       f"from {iso(burst.first)} to {iso(burst.last)}. Jobs: {shown or 'none found'}. "
                       f"Kubelet: {burst.message}")
        annotations = {"summary": summary, "description": description, "jobs": ", ".join(jobs),
                       "rejected_pods": str(count)}
        return wire("firing", labels, annotations, iso(burst.first))


__all__ = ["AdmissionTracker", "Burst"]
