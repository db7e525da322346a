"""/readyz's view of the store (alertd/app/store_health.py) on an injected clock: a failure counts for the
window unless the same kind succeeded since, and a failure that keeps happening keeps counting."""
from __future__ import annotations

from alertd.app.store_health import StoreHealth


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def health() -> tuple[StoreHealth, Clock]:
    clock = Clock()
    return StoreHealth(window=30.0, clock=clock), clock


def test_a_step_failure_counts_for_the_window_then_stops():
    h, clock = health()
    h.step_failed("OperationalError: disk I/O error")
    clock.t += 29.9
    assert h.failure() == "store failing: OperationalError: disk I/O error"
    clock.t += 0.2
    assert h.failure() == ""


def test_a_retried_step_failure_keeps_counting_and_a_committed_step_ends_it():
    h, clock = health()
    for _ in range(5):  # the processor retries every couple of seconds while webhooks wait
        h.step_failed("locked")
        clock.t += 20.0
        assert h.failure() == "store failing: locked"
    h.step_ok()
    assert h.failure() == ""


def test_a_refused_append_counts_until_an_append_succeeds_or_the_window_ends():
    h, clock = health()
    h.append_failed()
    assert h.failure() == "store refusing writes: webhooks are answered 503"
    clock.t += 1.0
    h.append_ok()
    assert h.failure() == ""
    h.append_failed()
    clock.t += 30.0
    assert h.failure() == ""


def test_the_engine_report_answers_when_the_store_is_fine():
    h, clock = health()
    h.engine_report = lambda: "engine behind"
    assert h.failure() == "engine behind"
    h.append_failed()
    assert h.failure().startswith("store refusing writes")
