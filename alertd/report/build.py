"""The report for a request: bring the facts up to date, read what the period needs, compute."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from alertd.report.compute import Period, compute
from alertd.report.rollup import rollup
from alertd.rules import rma
from alertd.rules.windows import CordonPolicy

MAX_PERIOD = timedelta(days=800)


class BadPeriod(ValueError):
    """since/until that make no period; the message names what is wrong."""


def check_period(p: Period) -> None:
    if p.until <= p.since:
        raise BadPeriod(f"until ({p.until.isoformat()}) must be after since ({p.since.isoformat()})")
    if p.until - p.since > MAX_PERIOD:
        raise BadPeriod(f"a period may span at most {MAX_PERIOD.days} days")


async def reliability(store: Any, p: Period, now: datetime, *, rules: tuple[rma.RmaRule, ...] = (),
                      policy: CordonPolicy | None = None, roll: bool = True) -> dict[str, Any]:
    """``roll``: bring the facts up to date first (the caller may skip it when it just did)."""
    check_period(p)
    if roll:
        await rollup(store, policy)
    facts = await store.report_facts(p.since, p.until, p.cluster)
    days = await store.fleet_days((p.until - timedelta(microseconds=1)).date().isoformat(), p.cluster)
    nodes = await store.fleet_nodes(p.cluster)
    return compute(facts, days, nodes, p, now, rules)


__all__ = ["BadPeriod", "check_period", "reliability"]
