"""normalize -> classify -> correlate, as one pure step over a batch of alerts."""
from __future__ import annotations

from datetime import datetime
from typing import Iterable

from alertd.engine.classify import classify
from alertd.engine.correlate import Correlator, EngineState
from alertd.core.model import Alert, Change, Signal, Subject
from alertd.engine.domains import Topology, topology_keys, with_topology
from alertd.engine.identity import NodeLookup
from alertd.engine.normalize import NormalizeConfig, subject_of
from alertd.rules.ruleset import RuleSet

# Alerts remembered by fingerprint (a fleet's firing alerts, each re-sent by Alertmanager at every
# repeat): about 140 bytes each while the alert is a member of an open incident (which holds the same
# subject and signal), some 650 once it is not; past the limit the oldest are forgotten.
PREPARED_LIMIT = 65_536
Prepared = tuple[int, Subject, Signal]  # the digest of what they were worked out from


class Engine:
    """The whole pure engine; swap ``rules`` to hot-reload without losing state."""

    def __init__(self, rules: RuleSet, ncfg: NormalizeConfig | None = None, state: EngineState | None = None,
                 nodes: NodeLookup | None = None, topology: Topology | None = None):
        self.ncfg = ncfg or NormalizeConfig()
        self.nodes = nodes  # the service's pod/address -> node index, filled before each step (no I/O here)
        self.rules = rules
        self.correlator = Correlator(rules.correlation, state)
        self.correlator.topology = topology  # the nodes' API labels, a snapshot refreshed at the edge
        self._prepared: dict[str, Prepared] = {}
        self._keep_labels()

    def _keep_labels(self) -> None:
        """Tell the topology snapshot which node labels the domain kinds name."""
        if self.correlator.topology is not None:
            self.correlator.topology.keep_labels(topology_keys(self.rules.correlation.domains))

    @property
    def state(self) -> EngineState:
        return self.correlator.state

    @property
    def heartbeats(self) -> tuple[str, ...]:
        """The alert names that are the pipeline's heartbeat (correlation.watchdog), never an incident's members."""
        return tuple(self.rules.correlation.watchdog.alertnames)

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.correlator.rules = rules.correlation
        self._prepared = {}  # a new dict, not clear(): a classification on the worker thread may be using the old
        self._keep_labels()

    def prepare(self, alert: Alert) -> Alert:
        """Subject and signal depend on nothing but the alert's labels, annotations and expression (and the
        rules): an alert sent again with the same ones gets what was worked out the first time, 15-40 µs
        saved per alert on the reference machine. Runs on the service's classification thread
        (alertd/app/budget.py), one alert at a time. The digest is Python's keyed hash: two different contents
        under one fingerprint agree on it about once in 2^64 changes, and nobody outside the process can aim
        for it."""
        digest = hash((tuple(alert.labels.items()), tuple(alert.annotations.items()), alert.generator_url,
                       self.nodes.generation if self.nodes is not None else 0))
        prepared, rules = self._prepared, self.rules  # as of now: a reload (set_rules) may swap both meanwhile
        known = prepared.get(alert.fingerprint)
        if known is None or known[0] != digest:
            known = (digest, subject_of(alert.labels, self.ncfg, alert.annotations, self.nodes),
                     classify(alert, rules, self.ncfg))
            if len(prepared) >= PREPARED_LIMIT and alert.fingerprint not in prepared:
                del prepared[next(iter(prepared))]
            prepared[alert.fingerprint] = known  # into the old dict after a reload: forgotten with it
        _, alert.subject, alert.signal = known
        topology = self.correlator.topology
        if topology is not None:  # the node's rack, clique, zone from the API, for an alert that names none
            labels = with_topology(alert.labels, alert.subject.cluster, alert.subject.node, rules.correlation.domains,
                                   topology)
            alert.labels = labels if labels is not None else alert.labels
        return alert

    def ingest(self, alerts: Iterable[Alert], now: datetime) -> list[Change]:
        return self.correlator.ingest((self.prepare(a) for a in alerts), now)

    def tick(self, now: datetime) -> list[Change]:
        return self.correlator.tick(now)
