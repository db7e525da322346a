"""The report's figures on ``/metrics``, for dashboards beside dcgm-exporter's (deploy/grafana/).

The reporting loop (alertd/app/reporting.py) computes the report for the last 7 and 30 days and keeps the
snapshot here; a collector exposes it at scrape time, so a scrape never queries the store.
"""
from __future__ import annotations

from typing import Any, Iterator

from alertd.core.json_types import JSONObject
from alertd.report.shapes import as_report

WINDOWS = {"7d": 7, "30d": 30}


class ReportCollector:
    """Gauges from the latest snapshot: per window the report, and the fleet by cluster and node type."""

    def __init__(self) -> None:
        self.reports: dict[str, JSONObject] = {}  # by window: alertd.report.build.reliability's documents
        self.fleet: list[tuple[str, str, str, int, bool]] = []  # store.fleet_nodes()

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily as G

        nodes = G("alertd_fleet_nodes", "GPU nodes as last sampled from Kubernetes.", labels=["cluster", "node_type"])
        gpus = G("alertd_fleet_gpus", "Allocatable GPUs as last sampled.", labels=["cluster", "node_type"])
        cordoned = G("alertd_fleet_cordoned_nodes", "Cordoned GPU nodes as last sampled.", labels=["cluster", "node_type"])
        per: dict[tuple[str, str], list[int]] = {}
        for cluster, _, node_type, n_gpus, is_cordoned in self.fleet:
            row = per.setdefault((cluster, node_type), [0, 0, 0])
            row[0] += 1
            row[1] += n_gpus
            row[2] += int(is_cordoned)
        for key, (n, g, c) in sorted(per.items()):
            nodes.add_metric(list(key), n)
            gpus.add_metric(list(key), g)
            cordoned.add_metric(list(key), c)
        yield from (nodes, gpus, cordoned)
        yield from self._report_families(G)

    def _report_families(self, G: Any) -> Iterator[Any]:
        simple = {"gpuDays": ("alertd_reliability_gpu_days", "GPU-days in the window (measured fleet size)."),
                  "failures": ("alertd_reliability_failures", "Hardware failures opened in the window."),
                  "failuresPer1000GpuDays": ("alertd_reliability_failures_per_1000_gpu_days",
                                             "Hardware failures per 1,000 GPU-days (Llama 3 405B: 0.47)."),
                  "gpuHoursOutOfService": ("alertd_reliability_gpu_hours_out_of_service",
                                           "GPU-hours out of service by failures in the window."),
                  "jobsInterrupted": ("alertd_reliability_jobs_interrupted", "Jobs hit by failures in the window."),
                  "gpuHoursLost": ("alertd_reliability_gpu_hours_lost", "Estimated GPU-hours of work lost by jobs.")}
        for key, (name, help_text) in simple.items():
            fam = G(name, help_text, labels=["window"])
            for window, doc in sorted(self.reports.items()):
                if isinstance(value := doc.get(key), (int, float)):
                    fam.add_metric([window], float(value))
            yield fam
        mttr = G("alertd_reliability_mttr_seconds", "Time to repair failures (median, p90), by action.",
                 labels=["window", "action", "quantile"])
        causes = G("alertd_reliability_failures_by_cause", "Failures by category and Xid.",
                   labels=["window", "category", "xid"])
        lemons = G("alertd_reliability_lemons", "Nodes and GPUs that failed repeatedly or match the RMA policy.",
                   labels=["window", "what"])
        for window, doc in sorted(self.reports.items()):
            r = as_report(doc)
            m = r["mttrSeconds"]
            for action, stats in [("all", m), *sorted(m["byAction"].items())]:
                for q, value in (("0.5", stats["median"]), ("0.9", stats["p90"])):
                    if value is not None:
                        mttr.add_metric([window, action, q], value)
            for c in r["byCause"]:
                causes.add_metric([window, c["category"], str(c["xid"] or "")], c["failures"])
            lemons.add_metric([window, "nodes"], len(r["lemons"]["nodes"]))
            lemons.add_metric([window, "gpus"], len(r["lemons"]["gpus"]))
        yield from (mttr, causes, lemons)


__all__ = ["WINDOWS", "ReportCollector"]
