"""The reliability report's values: the fact kept per incident (report_facts rows) and the report document
(the API's JSON, the CSV, the digest and /metrics read it)."""
from __future__ import annotations

from enum import StrEnum
from typing import TypedDict, cast

from alertd.core.json_types import JSONObject


class FactKind(StrEnum):
    """What an incident is to the report (alertd/report/facts.py says how each is told apart)."""

    FAILURE = "failure"
    APPLICATION = "application"
    MAINTENANCE = "maintenance"
    FOLDED = "folded"
    OTHER = "other"


APART = (FactKind.APPLICATION, FactKind.MAINTENANCE, FactKind.OTHER)  # counted apart from the failures


class JobHit(TypedDict):
    namespace: str
    kind: str
    name: str
    gpus: int
    gpuHoursLost: float


class Fact(TypedDict):
    """One incident as the report counts it (alertd.report.facts.fact)."""

    id: str
    cluster: str
    node: str
    nodes: list[str]
    nodeType: str
    openedAt: str
    resolvedAt: str | None
    endedAt: str | None  # its last alert's end, else its resolution (facts of older versions lack it)
    kind: str  # a FactKind
    category: str
    severity: str
    xid: int | None
    action: str
    title: str
    gpusOut: int
    gpus: list[str]
    jobs: list[JobHit]


def as_facts(rows: list[JSONObject]) -> list[Fact]:
    """Fact rows as the store returns them: the JSON of what fact() wrote."""
    return cast(list[Fact], rows)


class MttrStats(TypedDict):
    repairs: int
    median: float | None
    p90: float | None


class Mttr(MttrStats):
    byAction: dict[str, MttrStats]


class Cause(TypedDict):
    category: str
    xid: int | None
    failures: int
    share: float


class LemonNode(TypedDict):
    node: str
    failures: int
    incidents: list[str]


class LemonGpu(TypedDict):
    uuid: str
    failures: int
    incidents: list[str]
    rmaRules: list[str]


class Lemons(TypedDict):
    nodes: list[LemonNode]
    gpus: list[LemonGpu]


class CordonedDay(TypedDict):
    day: str
    byNodeType: dict[str, int]


class Cordoned(TypedDict):
    now: dict[str, int]
    daily: list[CordonedDay]


class Week(TypedDict):
    week: str
    failures: int
    gpuDays: float
    failuresPer1000GpuDays: float | None


class Day(TypedDict):
    day: str
    gpus: float
    gpuHoursOutOfService: float


class Reference(TypedDict):
    name: str
    per1000GpuDays: float


class Report(TypedDict):
    """The report of one period (alertd.report.compute.compute)."""

    since: str
    until: str
    cluster: str
    nodeType: str
    gpuDays: float
    failures: int
    failuresPer1000GpuDays: float | None
    apart: dict[str, int]
    byCause: list[Cause]
    mttrSeconds: Mttr
    gpuHoursOutOfService: float
    jobsInterrupted: int
    gpuHoursLost: float
    lemons: Lemons
    cordoned: Cordoned
    weekly: list[Week]
    daily: list[Day]
    references: list[Reference]
    incidents: list[str]


def report_json(r: Report) -> JSONObject:
    """The report as the JSON document other layers serve and hand back (the API's body, the CSV's source)."""
    return cast(JSONObject, r)


def as_report(doc: JSONObject) -> Report:
    """A document report_json made."""
    return cast(Report, doc)


__all__ = ["APART", "Cause", "Cordoned", "CordonedDay", "Day", "Fact", "FactKind", "JobHit", "LemonGpu", "LemonNode",
           "Lemons", "Mttr", "MttrStats", "Reference", "Report", "Week", "as_facts", "as_report", "report_json"]
