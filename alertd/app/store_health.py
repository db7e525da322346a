"""What /readyz says about the store: failures of the inbox append and of the engine's steps.

A failure counts for ``window`` seconds after it, unless one of the same kind
succeeded since. A failure that keeps happening keeps refreshing itself (the
processor retries a failed step every second or two while webhooks wait); one that
nothing retries (a housekeeping query, a tick) stops counting, so a lone replica
that its Kubernetes Service stopped sending webhooks to becomes ready again.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

UNREADY_AFTER_STORE_FAILURE = 30.0  # seconds


@dataclass
class StoreHealth:
    window: float = UNREADY_AFTER_STORE_FAILURE
    step_error: str = ""
    step_failed_at: float = 0.0
    append_failed_at: float = 0.0
    append_ok_at: float = 0.0
    # On a receiver of ``serve --receivers N``: its engine process's report (alertd/app/receiver_group.py), which the
    # receiver's /readyz answers for, since the engine process takes no connection.
    engine_report: Callable[[], str] | None = None
    # The leader's sources (alertd/app/sources.py): a watch broken for too long.
    sources_report: Callable[[], str] | None = None
    clock: Callable[[], float] = time.monotonic  # injected by tests, so a window passes without waiting it out

    def step_failed(self, error: str) -> None:
        self.step_error, self.step_failed_at = error, self.clock()

    def step_ok(self) -> None:
        """An engine step committed, or the engine that failed is gone (a deposed leader follows)."""
        self.step_error = ""

    def append_failed(self) -> None:
        self.append_failed_at = self.clock()

    def append_ok(self) -> None:
        self.append_ok_at = self.clock()

    def failure(self) -> str:
        """Why /readyz fails for the store, or "" when it does not."""
        now = self.clock()
        if self.step_error and now - self.step_failed_at < self.window:
            return f"store failing: {self.step_error}"
        if self.append_failed_at > self.append_ok_at and now - self.append_failed_at < self.window:
            return "store refusing writes: webhooks are answered 503"
        if self.sources_report is not None and (broken := self.sources_report()):
            return broken
        return self.engine_report() if self.engine_report is not None else ""
