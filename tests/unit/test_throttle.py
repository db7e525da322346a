"""Token buckets of failed logins (alertd/web/throttle.py), on an injected clock."""
from __future__ import annotations

from alertd.config.credentials import Credentials
from alertd.web.auth import Authenticator
from alertd.web.throttle import MAX_KEYS, Buckets, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_client_gets_its_burst_then_one_attempt_per_refill():
    clock = Clock()
    throttle = LoginThrottle.default(clock)
    for n in range(10):
        assert throttle.retry_after("10.0.0.1", f"guess-{n}") == 0
        throttle.failed("10.0.0.1", f"guess-{n}")
    assert throttle.retry_after("10.0.0.1", "guess-x") == 6
    assert throttle.retry_after("10.0.0.2", "guess-x") == 0  # another client is not held up
    clock.now += 3
    assert throttle.retry_after("10.0.0.1", "guess-x") == 3
    clock.now += 3
    assert throttle.retry_after("10.0.0.1", "guess-x") == 0
    throttle.failed("10.0.0.1", "guess-x")
    assert throttle.retry_after("10.0.0.1", "guess-y") == 6  # one per refill, no second burst
    clock.now += 600
    assert throttle.retry_after("10.0.0.1", "guess-z") == 0  # refilled, never above the burst
    for n in range(10):
        throttle.failed("10.0.0.1", f"again-{n}")
    assert throttle.retry_after("10.0.0.1", "again-x") > 0


def test_one_value_is_throttled_across_clients():
    clock = Clock()
    throttle = LoginThrottle.default(clock)
    for n in range(5):
        throttle.failed(f"10.0.1.{n}", "same-value")
    assert throttle.retry_after("10.0.2.1", "same-value") == 60
    assert throttle.retry_after("10.0.2.1", "other-value") == 0
    assert "same-value" not in repr(throttle.values._level)  # only its hash is kept


def test_many_clients_do_not_grow_the_table_without_bound():
    clock = Clock()
    buckets = Buckets(2, 1.0, clock)
    for n in range(MAX_KEYS + 10):
        buckets.take(f"c{n}")
        clock.now += 0.001
    assert len(buckets._level) <= MAX_KEYS


def test_a_throttled_clients_refusals_leave_one_per_6_s_however_many_it_sends_at_once():
    clock = Clock()
    auth = Authenticator(Credentials(), Credentials(), clock=clock)
    waits = [auth.answer_slot("10.0.0.1") for _ in range(14)]  # 14 wrong guesses at once on 14 connections
    assert waits[:11] == [6.0 * n for n in range(11)] and waits[11:] == [None] * 3  # past ten: no answer
    assert auth.answer_slot("10.0.0.2") == 0.0  # another client is not held up
    clock.now += 66
    assert auth.answer_slot("10.0.0.1") == 0.0
