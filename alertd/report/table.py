"""The report as CSV, one figure per line (section, key, value): sorts and pivots in any spreadsheet."""
from __future__ import annotations

import csv
import io
from typing import Iterator

from alertd.core.json_types import JSONObject

from alertd.report.shapes import as_report
from alertd.rules.rma import csv_cell

SUMMARY = ("since", "until", "cluster", "nodeType", "gpuDays", "failures", "failuresPer1000GpuDays",
           "gpuHoursOutOfService", "jobsInterrupted", "gpuHoursLost")


def _rows(doc: JSONObject) -> Iterator[tuple[str, str, object]]:
    for key in SUMMARY:
        yield "summary", key, doc[key]
    r = as_report(doc)
    for kind, n in r["apart"].items():
        yield "apart", kind, n
    for c in r["byCause"]:
        yield "byCause", c["category"] + (f" xid {c['xid']}" if c.get("xid") else ""), c["failures"]
    m = r["mttrSeconds"]
    yield "mttrSeconds", "median", m["median"]
    yield "mttrSeconds", "p90", m["p90"]
    for action, s in m["byAction"].items():
        yield "mttrSeconds", f"{action} median", s["median"]
        yield "mttrSeconds", f"{action} p90", s["p90"]
    for node in r["lemons"]["nodes"]:
        yield "lemonNode", node["node"], node["failures"]
    for g in r["lemons"]["gpus"]:
        yield "lemonGpu", g["uuid"], g["failures"]
    for node_type, n in r["cordoned"]["now"].items():
        yield "cordonedNow", node_type, n
    for day in r["cordoned"]["daily"]:
        for node_type, n in day["byNodeType"].items():
            yield "cordonedDaily", f"{day['day']} {node_type}", n
    for w in r["weekly"]:
        yield "failuresPer1000GpuDaysWeekly", w["week"], w["failuresPer1000GpuDays"]
    for d in r["daily"]:
        yield "gpuHoursOutOfServiceDaily", d["day"], d["gpuHoursOutOfService"]


def to_csv(report: JSONObject) -> str:
    """The report (alertd.report.build.reliability's document) as CSV."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(("section", "key", "value"))
    for section, key, value in _rows(report):
        w.writerow((section, csv_cell(key), "" if value is None else csv_cell(value)))
    return buf.getvalue()


__all__ = ["to_csv"]
