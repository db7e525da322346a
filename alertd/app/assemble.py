"""One way to assemble a Service from a config: the CLI, the tests and the benchmarks all use it."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from alertd.config.settings import Config
from alertd.enrich.node_index import NodeIndex
from alertd.app.notifiers import build_notifiers, build_router
from alertd.app.recording_rules import load_site_rules
from alertd.rules.ruleset import RuleSet
from alertd.app.service import Service, utcnow
from alertd.store.facade import SqlStore


def build_service(cfg: Config, store: SqlStore, rules: RuleSet | None = None, *,
                  clock: Callable[[], datetime] = utcnow, **options: Any) -> Service:
    """The service with the notifiers and router the config and rules call for (``options``: role,
    enricher, ... as Service takes them)."""
    rules = rules if rules is not None else load_site_rules(cfg)
    return Service(cfg, store, rules, clock=clock, notifiers=build_notifiers(cfg, store, clock),
                   router=build_router(cfg, rules, announce=options.get("role") != "receiver"), nodes=NodeIndex.from_config(cfg), **options)
