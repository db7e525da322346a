"""deploy/grafana/alertd-reliability.json charts only metrics alertd exports (a renamed metric would leave a
panel empty without anybody noticing)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from alertd.report.metrics import ReportCollector
from tests.unit.test_report_week import MON

ROOT = Path(__file__).resolve().parents[2]


def test_every_metric_the_dashboard_queries_is_exported():
    dash = json.loads((ROOT / "deploy" / "grafana" / "alertd-reliability.json").read_text())
    queried = {m for p in dash["panels"] for t in p["targets"]
               for m in re.findall(r"\b(alertd_[a-z0-9_]+)", t["expr"])}
    collector = ReportCollector()
    collector.fleet = [("prod", "gpu-1", "H100", 8, True)]
    empty = {"gpuDays": 1.0, "failures": 0, "failuresPer1000GpuDays": 0.0, "gpuHoursOutOfService": 0.0,
             "jobsInterrupted": 0, "gpuHoursLost": 0.0, "byCause": [], "lemons": {"nodes": [], "gpus": []},
             "mttrSeconds": {"median": None, "p90": None, "byAction": {}}, "since": MON.isoformat()}
    collector.reports["30d"] = empty
    exported = {f.name for f in collector.collect()}
    assert queried and queried <= exported, sorted(queried - exported)
    assert {p["id"] for p in dash["panels"]} == set(range(1, len(dash["panels"]) + 1))
