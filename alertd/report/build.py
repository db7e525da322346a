"""The report for a request: bring the facts up to date, read what the period needs, compute."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from alertd.core.json_types import JSONObject

from alertd.report.compute import Period, compute
from alertd.report.rollup import RollupStore, rollup
from alertd.report.shapes import as_facts, report_json
from alertd.rules import rma
from alertd.rules.windows import CordonPolicy

MAX_PERIOD = timedelta(days=800)


class ReportStore(RollupStore, Protocol):
    """The store as a report reads it: the facts the rollup keeps (alertd/store/report_tables.py)."""

    async def report_facts(self, since: datetime, until: datetime, cluster: str = "") -> list[JSONObject]: ...

    async def fleet_days(self, until_day: str, cluster: str = "") -> list[tuple[str, str, str, int, int, int, int]]:
        """The fleet's size per day and node type, up to ``until_day``."""


class BadPeriod(ValueError):
    """since/until that make no period; the message names what is wrong."""


def check_period(p: Period) -> None:
    if p.until <= p.since:
        raise BadPeriod(f"until ({p.until.isoformat()}) must be after since ({p.since.isoformat()})")
    if p.until - p.since > MAX_PERIOD:
        raise BadPeriod(f"a period may span at most {MAX_PERIOD.days} days")


async def reliability(store: ReportStore, p: Period, now: datetime, *, rules: tuple[rma.RmaRule, ...] = (),
                      policy: CordonPolicy | None = None, roll: bool = True) -> JSONObject:
    """``roll``: bring the facts up to date first (the caller may skip it when it just did)."""
    check_period(p)
    if roll:
        await rollup(store, policy)
    facts = as_facts(await store.report_facts(p.since, p.until, p.cluster))
    days = await store.fleet_days((p.until - timedelta(microseconds=1)).date().isoformat(), p.cluster)
    nodes = await store.fleet_nodes(p.cluster)
    return report_json(compute(facts, days, nodes, p, now, rules))


__all__ = ["BadPeriod", "ReportStore", "check_period", "reliability"]
