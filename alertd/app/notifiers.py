"""Builds the notifiers and the router from the configuration and the rules, through the registry.

* Nothing but the console configured: the console logs every change (the default).
* A ``routing`` section in the rules: the Router sends each change where the
  routes say; targets whose integration is not configured fall back to the console.
* Slack configured, no routing section: everything goes to ``notify.slack.default_channel``.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable

from alertd.config.settings import Config
from alertd.integrations import registry
from alertd.integrations.base import Notifier, NotifierSettings, NotifyStore
from alertd.notify.router import ConsoleRouter, Router
from alertd.rules.routing import Routing, default_routing
from alertd.integrations.slack.integration import SlackSettings
from alertd.rules.ruleset import RuleSet

log = logging.getLogger(__name__)


def configured(cfg: Config) -> dict[str, NotifierSettings]:
    """name -> settings of every integration the config turns on (the console always)."""
    out: dict[str, NotifierSettings] = {}
    for name, integration in registry.INTEGRATIONS.items():
        settings = cfg.notify.get(name) or integration.settings(integration.section(), registry.Links())
        if name == "console" or integration.enabled(settings):
            out[name] = settings
    return out


def build_notifiers(cfg: Config, store: NotifyStore, clock: Callable[[], datetime]) -> dict[str, Notifier]:
    """The installation id is known once the store is open (alertd/app/service.py): read when sending."""
    return {name: registry.INTEGRATIONS[name].notifier(s, store, clock, installation=lambda: cfg.installation_id)
            for name, s in configured(cfg).items()}


def available_kinds(cfg: Config) -> set[str]:
    return set(configured(cfg))


def check_keys(cfg: Config, routing: Routing) -> list[str]:
    """Key/endpoint names the rules use but the config does not define (of integrations that are on)."""
    out: list[str] = []
    for name, settings in configured(cfg).items():
        out += registry.INTEGRATIONS[name].unknown(settings, routing.addresses(name))
    return sorted(out)


def build_router(cfg: Config, rules: RuleSet, *, announce: bool = True) -> ConsoleRouter | Router:
    """The router of the rules' routing section; ``announce``: log where notifications go (one process of a
    group says it, not each receiver beside it)."""
    slack = SlackSettings.from_config(cfg)
    kinds = available_kinds(cfg)
    if cfg.console is False:
        kinds.discard("console")
    routing = rules.routing
    if routing is None and slack.enabled and slack.default_channel:
        routing = default_routing(slack.default_channel)
    if routing is None:
        return ConsoleRouter(enabled=cfg.console is not False)
    for name in check_keys(cfg, routing):
        log.error("routing names %r, which the notify section of the config does not define", name)
    if kinds <= {"console"} and announce:
        log.info("no Slack token or PagerDuty keys configured: routed notifications go to the console "
                 "(set notify.slack or notify.pagerduty in the config: docs/notifications.md)")
    return Router(routing, debounce=slack.debounce, available=kinds,
                  console_mirror=bool(cfg.console) and not kinds <= {"console"},
                  reopens_within=rules.correlation.reopens_within)
