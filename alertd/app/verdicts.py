"""History in every decision: the verdict of an engine step's new and changed incidents, inside the step.

After correlation and before routing, each incident the step opened, reopened or gave a new fault (at most
``MAX_PER_STEP`` of them; a storm's node incidents fold into their fleet and are not judged one by one) gets
the snapshot of its GPUs' and node's past from the store (alertd/store/history_snapshot.py) and the judge's
verdict (alertd/engine/judge.py, rules/history.yml). A new verdict is kept on the incident, raises its
severity, and joins the step's change as a ``verdict`` event: on an opening change the first post and page
carry it; later, routing updates the message already posted (and its thread) and pages nothing again.
The verdict is committed with the step, so a restart keeps it.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Callable, Iterable, Protocol, Sequence

from alertd.core.model import Change, Incident
from alertd.core.vocabulary import EventKind
from alertd.engine.judge import VERDICT_EVENT, History, apply_verdict, judge, judgeable
from alertd.rules.history import HistoryRule, longest_lookback

log = logging.getLogger(__name__)
MAX_PER_STEP = 64  # incidents judged in one step (each is one store read)
JUDGED_KINDS = frozenset({EventKind.OPENED, EventKind.REOPENED, EventKind.ALERT_JOINED, EventKind.CLASSIFICATION_UPGRADED})


class HistorySource(Protocol):
    """The store's read of the past (alertd/store/history_snapshot.py)."""

    async def history_snapshot(self, gpus: Sequence[str], node: str, since: datetime,
                               exclude: str = "") -> History: ...


def to_judge(changes: Iterable[Change]) -> list[Change]:
    """The changes whose incident may have a new verdict: a node's own incident that opened or got a fault
    (one the judge would turn away unread, such as one of repair symptoms only, costs no store read)."""
    out = [c for c in changes if JUDGED_KINDS & set(c.kinds) and not c.incident.parent_id and judgeable(c.incident)]
    if len(out) > MAX_PER_STEP:
        log.info("history: %d incidents changed in one step; the first %d are judged", len(out), MAX_PER_STEP)
    return out[:MAX_PER_STEP]


def gpu_uuids(inc: Incident) -> list[str]:
    return [g["uuid"] for g in inc.gpus if g.get("uuid")]


class Verdicts:
    """Judges a step's changes with the rules of the moment (a reload swaps them)."""

    def __init__(self, source: HistorySource, rules: Callable[[], tuple[HistoryRule, ...]]):
        self.source, self.rules = source, rules

    async def judge_step(self, changes: Iterable[Change], now: datetime) -> int:
        """Give the step's incidents their verdicts; how many got a new one."""
        rules = tuple(r for r in self.rules() if r.action)
        lookback = longest_lookback(rules)
        if not rules or lookback <= timedelta(0):
            return 0
        found = 0
        for change in to_judge(changes):
            inc = change.incident
            try:
                history = await self.source.history_snapshot(gpu_uuids(inc), inc.node, now - lookback, inc.id)
            except Exception as exc:  # the step goes on without history; its commit meets the same store
                log.warning("history: could not read the past of %s: %s", inc.id, exc)
                return found
            found += judge_change(change, history, rules, now)
        return found


def judge_change(change: Change, history: History, rules: tuple[HistoryRule, ...], now: datetime) -> bool:
    """Judge one change's incident; a new verdict joins the change as its ``verdict`` event."""
    inc = change.incident
    if not apply_verdict(inc, judge(inc, history, rules, now), now):
        return False
    change.kinds.append(VERDICT_EVENT)
    change.events.append(inc.timeline[-1])
    return True
