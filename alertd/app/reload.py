"""Reloading without a restart: the rules (swapped in whole or refused), and the reloader that SIGHUP and
POST /-/reload run: the rules, then each further step the server adds (credentials re-read from their
files, the listener's certificate, the receiver processes of ``serve --receivers N``)."""
from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any, Callable, Coroutine, Protocol, Sequence

from alertd.app.processor import Processor
from alertd.app.recording_rules import load_site_rules
from alertd.config.settings import Config
from alertd.core.service_metrics import Metrics
from alertd.rules.ruleset import RuleSet

log = logging.getLogger(__name__)
Outcome = tuple[bool, str]  # (ok, what went wrong)


class TakesRules(Protocol):
    """What routes by the rules takes a reloaded set whole."""

    def set_rules(self, rules: RuleSet) -> None: ...


class RuleReload:
    """Swap in a new rule set; an invalid one is refused and the running one stays."""

    def __init__(self, cfg: Config, processor: Processor, router: TakesRules, metrics: Metrics):
        self.cfg, self.processor, self.router, self.metrics = cfg, processor, router, metrics
        metrics.reload_ok.set(1)
        metrics.reload_time.set(time.time())

    def __call__(self) -> Outcome:
        try:
            rules = load_site_rules(self.cfg, previous=self.processor.rules.recorded)
        except Exception as exc:  # InvalidDocument names file:line; anything else is reported too
            self.metrics.reload_ok.set(0)
            log.error("rule reload failed, keeping the running rules:\n%s", exc)
            return False, str(exc)
        self.processor.set_rules(rules)
        self.router.set_rules(rules)
        self.metrics.reload_ok.set(1)
        self.metrics.reload_time.set(time.time())
        log.info("rules reloaded from %s", ", ".join(rules.sources))
        return True, ""


class Reloader:
    """Runs every step and reports the first failure; SIGHUP runs it while the part is started, and records
    it in the audit trail when ``audit`` is given (a group's receiver leaves that to its engine process)."""

    name = "reloader"

    def __init__(self, steps: Sequence[Callable[[], Outcome]], *,
                 audit: Callable[..., Coroutine[Any, Any, None]] | None = None, signum: int = signal.SIGHUP):
        self.steps, self.audit, self.signum = list(steps), audit, signum
        self._tasks: set[asyncio.Task[Any]] = set()

    def reload(self) -> Outcome:
        ok, error = True, ""
        for step in self.steps:
            step_ok, step_error = step()
            if not step_ok:
                ok, error = False, error or step_error
        return ok, error

    async def __call__(self) -> Outcome:
        """As POST /-/reload calls it (web/keys.py RELOAD)."""
        return self.reload()

    def reload_recorded(self) -> None:
        """What SIGHUP does, for another cause (a rule file changed): reload, and record it."""
        self._on_signal()

    def _on_signal(self) -> None:
        ok, error = self.reload()
        if self.audit is not None:
            task = asyncio.get_running_loop().create_task(
                self.audit("SIGHUP", "reload", "rules", "signal", "ok" if ok else "failed", error))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        asyncio.get_running_loop().add_signal_handler(self.signum, self._on_signal)

    async def stop(self) -> None:
        asyncio.get_running_loop().remove_signal_handler(self.signum)
        await asyncio.gather(*self._tasks, return_exceptions=True)
