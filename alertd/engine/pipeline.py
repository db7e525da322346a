"""normalize -> classify -> correlate, as one pure step over a batch of alerts."""
from __future__ import annotations

from datetime import datetime
from typing import Iterable

from alertd.engine.classify import classify
from alertd.engine.correlate import Correlator, EngineState
from alertd.model import Alert, Change
from alertd.receive.normalize import NormalizeConfig, normalize
from alertd.rules import RuleSet


class Engine:
    """The whole pure engine; swap ``rules`` to hot-reload without losing state."""

    def __init__(self, rules: RuleSet, ncfg: NormalizeConfig | None = None, state: EngineState | None = None):
        self.ncfg = ncfg or NormalizeConfig()
        self.rules = rules
        self.correlator = Correlator(rules.correlation, state)

    @property
    def state(self) -> EngineState:
        return self.correlator.state

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.correlator.rules = rules.correlation

    def prepare(self, alert: Alert) -> Alert:
        normalize(alert, self.ncfg)
        alert.signal = classify(alert, self.rules, self.ncfg)
        return alert

    def ingest(self, alerts: Iterable[Alert], now: datetime) -> list[Change]:
        return self.correlator.ingest((self.prepare(a) for a in alerts), now)

    def tick(self, now: datetime) -> list[Change]:
        return self.correlator.tick(now)
