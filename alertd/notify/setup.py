"""Builds the notifiers and the router from the configuration and the rules.

* No Slack token and no PagerDuty keys: the console logs every change (the default).
* A ``routing`` section in the rules: the Router sends each change where the
  routes say; targets whose notifier is not configured fall back to the console.
* Slack configured, no routing section: everything goes to ``notify.slack.default_channel``.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable

from alertd.config import Config
from alertd.notify.base import Notifier
from alertd.notify.console import ConsoleNotifier
from alertd.notify.pagerduty import PagerDutyNotifier, PagerDutySettings
from alertd.notify.router import ConsoleRouter, Router
from alertd.notify.routing import Routing, default_routing
from alertd.notify.slack import SlackNotifier, SlackSettings
from alertd.rules import RuleSet
from alertd.store.base import Store

log = logging.getLogger(__name__)


def build_notifiers(cfg: Config, store: Store, clock: Callable[[], datetime]) -> dict[str, Notifier]:
    notifiers: dict[str, Notifier] = {"console": ConsoleNotifier()}
    slack = SlackSettings.from_config(cfg)
    if slack.enabled:
        notifiers["slack"] = SlackNotifier(slack, store, clock)
    pagerduty = PagerDutySettings.from_config(cfg)
    if pagerduty.enabled:
        notifiers["pagerduty"] = PagerDutyNotifier(pagerduty, store, clock)
    for notifier in notifiers.values():  # known once the store is open: read when sending
        notifier.installation = lambda: cfg.installation_id  # type: ignore[attr-defined]
    return notifiers


def available_kinds(cfg: Config) -> set[str]:
    kinds = {"console"}
    if SlackSettings.from_config(cfg).enabled:
        kinds.add("slack")
    if PagerDutySettings.from_config(cfg).enabled:
        kinds.add("pagerduty")
    return kinds


def check_keys(cfg: Config, routing: Routing) -> list[str]:
    """Routing key names the rules use but the config does not define."""
    pd = PagerDutySettings.from_config(cfg)
    if not pd.enabled:
        return []
    return sorted(n for n in routing.key_names() if n not in pd.routing_keys)


def build_router(cfg: Config, rules: RuleSet) -> Any:
    slack = SlackSettings.from_config(cfg)
    kinds = available_kinds(cfg)
    if cfg.console is False:
        kinds.discard("console")
    routing = rules.routing if isinstance(rules.routing, Routing) else None
    if routing is None and slack.enabled and slack.default_channel:
        routing = default_routing(slack.default_channel)
    if routing is None:
        return ConsoleRouter(enabled=cfg.console is not False)
    for name in check_keys(cfg, routing):
        log.error("routing uses PagerDuty routing key %r, which notify.pagerduty.routing_keys does not define", name)
    if kinds <= {"console"}:
        log.info("no Slack token or PagerDuty keys configured: routed notifications go to the console")
    return Router(routing, debounce=slack.debounce, available=kinds,
                  console_mirror=bool(cfg.console) and not kinds <= {"console"})
