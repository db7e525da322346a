"""``alertd check --prometheus-rules``: alerting rules that can race Alertmanager's group_interval.

Alertmanager's DedupStage sends nothing for a group whose alerts all fired and resolved between two of its
flushes (notify/notify.go: "no need to notify the receiver since it doesn't know about them"). An alert that
fires on an event (alertd/promql/hold.py) is firing for about its window, less its ``for:``, less up to one
evaluation interval before an evaluation sees the sample, plus ``keep_firing_for``. When that is shorter than
group_wait + group_interval, the alert can fire just after its group's flush and resolve before the next one:
Alertmanager never sends it. The fix named is the ``keep_firing_for`` (whole minutes) that closes the gap.
A rule whose ``for:`` outlasts what one event shows never fires on one event (only on a sustained rise):
no warning.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping

from alertd.core.durations import parse_duration
from alertd.core.json_types import JSONObject
from alertd.promql.hold import event_hold

DEFAULT_EVALUATION = timedelta(minutes=1)  # Prometheus's global evaluation_interval when a group sets none


@dataclass(frozen=True, slots=True)
class Timing:
    """Alertmanager's timers the rules are checked against (its defaults unless told), and the evaluation
    interval of a group that sets none."""

    group_wait: timedelta = timedelta(seconds=30)
    group_interval: timedelta = timedelta(minutes=5)
    evaluation: timedelta = DEFAULT_EVALUATION


def race_warning(rule: JSONObject, group_interval: object, timing: Timing, recorded: Mapping[str, str]) -> str:
    """The warning for one alerting rule of a group (its ``interval``, or None), or "". ``recorded``: the
    recording rules known (an event may hide in one)."""
    hold = event_hold(str(rule.get("expr", "")), recorded)
    if hold is None:
        return ""
    try:
        pending = _seconds(rule.get("for"))
        kept = _seconds(rule.get("keep_firing_for"))
        evaluation = _seconds(group_interval) if group_interval else timing.evaluation.total_seconds()
    except ValueError:
        return ""  # a bad duration: promtool says so
    fires = hold.seconds - pending - evaluation  # how long one event keeps it firing before keep_firing_for
    lasts, needed = fires + kept, (timing.group_wait + timing.group_interval).total_seconds()
    if fires <= 0 or lasts >= needed:
        return ""  # one event never outlasts its `for:` (it fires only on a sustained rise), or it lasts enough
    keep = math.ceil((needed - fires) / 60)
    return (f"fires on an event ({hold.what}) and stays firing about {_text(lasts)} (window - for - one "
            f"evaluation + keep_firing_for), less than Alertmanager's group_wait + group_interval "
            f"({_text(needed)}): fired just after its group's flush, it can resolve before the next one and is never "
            f"sent (notify.go's DedupStage); {'raise' if kept else 'add'} keep_firing_for: {keep}m (Prometheus >= 2.42)")


def _seconds(value: object) -> float:
    return parse_duration(str(value)).total_seconds() if value not in (None, "") else 0.0


def _text(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return (f"{minutes}m" if minutes else "") + (f"{rest}s" if rest or not minutes else "")


__all__ = ["Timing", "race_warning"]
