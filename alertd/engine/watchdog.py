"""The alerting pipeline's heartbeat (``correlation.watchdog``): Prometheus' always-firing Watchdog alert,
carried by Alertmanager, says the pipeline works. Heard, it is remembered and closes the silence incident; not
heard for ``timeout``, the tick opens ONE incident saying other alerts may be missing. Pure: state and ``now``
in, through the correlator's change log."""
from __future__ import annotations

from datetime import datetime
from typing import Protocol

from alertd.core.model import FIRING, Alert, Event, Incident, Signal, as_severity
from alertd.core.vocabulary import Category, EventKind, Group, SignalKind
from alertd.engine.state import EngineState
from alertd.rules.ruleset import CorrelationRules

PIPELINE_KEY = "watchdog|pipeline"


class WatchdogHost(Protocol):
    """What the heartbeat needs of the correlator (engine/correlate.py): its state, rules and lifecycle steps."""

    state: EngineState
    rules: CorrelationRules

    def open_incident(self, key: str, group: str, signal: Signal, now: datetime) -> Incident: ...

    def close(self, inc: Incident, now: datetime, text: str, actor: str = "") -> None: ...

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None: ...


class Watchdog:
    """The heartbeat of one Correlator's pipeline."""

    def __init__(self, host: WatchdogHost):
        self.c = host

    def heartbeat(self, alert: Alert, now: datetime) -> None:
        """A Watchdog alert heard: the pipeline works, and its silence incident, if open, closes."""
        if alert.status != FIRING:
            return
        seen = alert.received_at or now
        if self.c.state.heartbeat_at is None or seen > self.c.state.heartbeat_at:
            self.c.state.heartbeat_at = seen
        pid = self.c.state.by_key.get(PIPELINE_KEY)
        if pid:
            self.c.close(self.c.state.incidents[pid], now, "heartbeat received again")

    def tick(self, now: datetime) -> None:
        """No heartbeat for ``timeout``: one incident says the pipeline is silent."""
        wd = self.c.rules.watchdog
        hb = self.c.state.heartbeat_at
        if hb is not None and now - hb > wd.timeout and PIPELINE_KEY not in self.c.state.by_key:
            sig = Signal(kind=SignalKind.WATCHDOG.value, severity=as_severity(wd.severity),
                         category=Category.PIPELINE.value, title="Alerting pipeline silent", runbook="pipeline-silent",
                         meaning=f"No {'/'.join(wd.alertnames)} heartbeat since {hb.isoformat()}: "
                                 "Prometheus or Alertmanager may be down, so other alerts may be missing.")
            inc = self.c.open_incident(PIPELINE_KEY, Group.WATCHDOG.value, sig, now)
            inc.primary = sig
            inc.severity, inc.category, inc.title = sig.severity, sig.category, sig.title
            inc.signals = [SignalKind.WATCHDOG.value]
            self.c.record(inc, inc.add_event(now, EventKind.OPENED, sig.meaning))


__all__ = ["PIPELINE_KEY", "Watchdog", "WatchdogHost"]
