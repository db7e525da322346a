"""Builds the notifiers and the router from the configuration and the rules."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from alertd.config import Config
from alertd.notify.base import Notifier
from alertd.notify.console import ConsoleNotifier
from alertd.notify.router import ConsoleRouter
from alertd.rules import RuleSet
from alertd.store.base import Store


def build_notifiers(cfg: Config, store: Store, clock: Callable[[], datetime]) -> dict[str, Notifier]:
    return {"console": ConsoleNotifier()}


def build_router(cfg: Config, rules: RuleSet) -> Any:
    return ConsoleRouter(enabled=cfg.console is not False)
