"""Classification off the event loop, within a budget per alert.

Normalising and classifying an alert (``Engine.prepare``) is the part of an engine step
whose cost depends on what a sender put in the alert: annotation text searched for an
Xid, a generatorURL's PromQL parsed. Linear-time matching (alertd/core/regex.py) and the
PromQL budget (receive/promql.py) bound it by the alert's size; this module keeps it
from holding the event loop (/readyz, the receivers, Slack buttons are answered while
a step classifies) and sets aside what overruns anyway:

- each alert is classified on a worker thread and its CPU time measured (thread CPU,
  so a machine busy with other work does not make a good alert look slow); one over
  ``cpu_per_alert`` is set aside with the reason, the others go on;
- an alert that raises is set aside at once (it would raise again);
- a step whose classification has not returned after ``stuck_after`` seconds of wall
  time is abandoned (its thread is left to finish on its own and a new one takes over)
  and reported as :class:`Stuck`: the service retries its webhooks one at a time and
  sets the one that sticks aside (alertd/app/service.py).

The engine stays pure: the clock read here is the thread's CPU clock, at the edge.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from alertd.engine.pipeline import Engine
from alertd.core.model import Alert

CPU_PER_ALERT = 0.5  # seconds of CPU one alert's classification may take
STUCK_AFTER = 10.0  # seconds of wall time one step's classification may take before it is abandoned

Keyed = tuple[str, Alert]  # (redelivery key, alert)


@dataclass(slots=True)
class Classified:
    """What a step's classification gave: the alerts to correlate, and the ones set aside (cause, reason)."""

    ok: list[Keyed] = field(default_factory=list)
    aside: list[tuple[str, Alert, str, str]] = field(default_factory=list)  # key, alert, cause, reason
    worst: float = 0.0  # the most CPU seconds one alert took


class Stuck(Exception):
    """Classification did not return in time; ``key`` is the alert it was on."""

    def __init__(self, key: str, seconds: float):
        super().__init__(f"classification of alert {key} did not finish within {seconds:g} s")
        self.key = key


class Budget:
    def __init__(self, cpu_per_alert: float = CPU_PER_ALERT, stuck_after: float = STUCK_AFTER,
                 cpu_clock: Callable[[], float] = time.thread_time):
        self.cpu_per_alert, self.stuck_after, self.cpu_clock = cpu_per_alert, stuck_after, cpu_clock
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="alertd-classify")
        self._current = ""
        self.abandoned = 0  # threads left behind on a stuck classification

    async def classify(self, engine: Engine, batch: list[Keyed]) -> Classified:
        """Prepare every alert of ``batch`` on the worker thread; Stuck when it does not return in time."""
        if not batch:
            return Classified()
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._run, engine, batch)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.stuck_after)
        except asyncio.TimeoutError:
            key = self._current
            self._executor.shutdown(wait=False)  # the thread cannot be stopped: a fresh one takes the next step
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="alertd-classify")
            self.abandoned += 1
            raise Stuck(key, self.stuck_after) from None

    def _run(self, engine: Engine, batch: list[Keyed]) -> Classified:
        out = Classified()
        start = self.cpu_clock()  # one read per alert: where one alert's CPU ends, the next one's begins
        for key, alert in batch:
            self._current = key
            try:
                engine.prepare(alert)
            except Exception as exc:  # the same alert would fail the same way again: set it aside now
                out.aside.append((key, alert, "failed", f"{type(exc).__name__}: {exc}"))
                start = self.cpu_clock()
                continue
            end = self.cpu_clock()
            spent, start = end - start, end
            out.worst = max(out.worst, spent)
            if spent > self.cpu_per_alert:
                out.aside.append((key, alert, "overran", f"classification took {spent:.2f} s of CPU, over the "
                                                         f"budget of {self.cpu_per_alert:g} s per alert"))
            else:
                out.ok.append((key, alert))
        return out

    def close(self) -> None:
        self._executor.shutdown(wait=False)


__all__ = ["Budget", "CPU_PER_ALERT", "Classified", "STUCK_AFTER", "Stuck"]
