"""The open-connection budget (alertd/web/connections.py) on an injected clock: the cap below the descriptor
limit, whom it closes to make room, when it refuses, and failed accepts logged once per interval."""
from __future__ import annotations

import asyncio
import errno
import logging
import resource
from dataclasses import dataclass, field

import pytest

from alertd.config.connections import ConnectionSettings
from alertd.core.service_metrics import Metrics
from alertd.web.connections import (BACKLOG, MIN_CONNECTIONS, AcceptErrors, ConnectionBudget, ErrorLogLimit,
                                    connection_cap)


@dataclass(eq=False)
class Conn:
    last_in: float
    proven: bool = False
    principal: str = ""
    client: str = "10.0.0.1"
    quiet: bool = True
    evicted: list[bool] = field(default_factory=list)

    def evict(self) -> None:
        self.evicted.append(True)


def value(metric) -> float:
    return metric._value.get()


def test_the_cap_fits_under_the_descriptor_limit_with_a_round_of_accepts_and_the_reserve():
    settings = ConnectionSettings(max_open=1024, reserved_fds=64)
    assert connection_cap(settings, soft_limit=256, in_use=30) == 256 - 30 - 64 - BACKLOG
    assert connection_cap(settings, soft_limit=1_048_576, in_use=30) == 1024
    assert connection_cap(settings, soft_limit=resource.RLIM_INFINITY, in_use=30) == 1024
    assert connection_cap(settings, soft_limit=100, in_use=30) == MIN_CONNECTIONS


def test_at_the_cap_the_longest_silent_unproven_connection_makes_room():
    metrics = Metrics()
    budget = ConnectionBudget(3, metrics)
    alertmanager, idle_old, idle_new = Conn(0.0, proven=True), Conn(1.0), Conn(5.0)
    for conn in (alertmanager, idle_old, idle_new):
        assert budget.admit(conn)
    newcomer = Conn(9.0)
    assert budget.admit(newcomer)
    assert idle_old.evicted and not alertmanager.evicted and not idle_new.evicted
    assert budget.held == {alertmanager, idle_new, newcomer}
    assert value(metrics.connections_closed.labels("evicted")) == 1
    assert value(metrics.connections_open) == 3 and value(metrics.connections_limit) == 3


def test_with_every_connection_in_the_middle_of_a_request_a_new_one_is_refused_and_counted():
    metrics = Metrics()
    budget = ConnectionBudget(2, metrics)
    held = [Conn(0.0, proven=True, principal="alertmanager", quiet=False), Conn(1.0, proven=True, quiet=False)]
    assert all(budget.admit(c) for c in held)
    assert not budget.admit(Conn(2.0))
    assert value(metrics.connections_refused) == 1 and not any(c.evicted for c in held)
    budget.release(held[0])
    assert budget.admit(Conn(3.0)) and value(metrics.connections_open) == 2


def test_with_every_connection_proven_the_principal_holding_most_gives_up_its_longest_idle_one():
    budget = ConnectionBudget(6, Metrics())
    alertmanager = [Conn(0.0, proven=True, principal="alertmanager", client="10.0.0.2")]
    holder = [Conn(1.0 + i, proven=True, principal="leaked-token", client="10.9.9.9") for i in range(5)]
    holder[0].quiet = False  # a request in hand: not closed
    for conn in alertmanager + holder:
        assert budget.admit(conn)
    probe = Conn(9.0, client="10.0.0.3")  # the kubelet's /readyz
    assert budget.admit(probe)
    assert holder[1].evicted and not alertmanager[0].evicted and not holder[0].evicted


def test_a_client_past_its_share_of_unproven_connections_gives_up_its_own():
    budget = ConnectionBudget(8, Metrics())
    flood = [Conn(10.0 + i, client="10.6.6.6") for i in range(6)]  # past a quarter of the cap
    others = [Conn(1.0, client="10.0.0.4"), Conn(2.0, client="10.0.0.5")]  # silent longer, another client's
    for conn in others + flood:
        assert budget.admit(conn)
    assert budget.admit(Conn(20.0, client="10.6.6.6"))
    assert flood[0].evicted and not any(c.evicted for c in others)
    assert budget.admit(Conn(21.0, client="10.0.0.7"))  # a client within its share: the longest silent goes
    assert others[0].evicted


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def emfile() -> dict:
    return {"message": "socket.accept() out of system resource", "socket": object(),
            "exception": OSError(errno.EMFILE, "Too many open files")}


async def test_failed_accepts_are_counted_each_and_logged_once_per_interval(caplog):
    loop = asyncio.get_running_loop()
    metrics, clock = Metrics(), Clock()
    handler = AcceptErrors(metrics, interval=10.0, clock=clock)
    others: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: others.append(context))
    handler.install(loop)
    try:
        with caplog.at_level(logging.ERROR, logger="alertd.web.connections"):
            for _ in range(1000):  # what asyncio reports in a second at EMFILE
                loop.call_exception_handler(emfile())
                clock.now += 0.001
            clock.now = 11.0
            loop.call_exception_handler(emfile())
            loop.call_exception_handler({"message": "something else", "exception": RuntimeError("x")})
    finally:
        handler.uninstall(loop)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "Too many open files" in lines[0] and "(999 more since the last message" in lines[1]
    assert value(metrics.accept_errors) == 1001
    assert [c["message"] for c in others] == ["something else"]
    assert loop.get_exception_handler() is not handler


@pytest.mark.parametrize("doc, field_, expected", [
    ({"header_timeout": "500ms"}, "header_timeout", 0.5), ({"keepalive_timeout": "2m"}, "keepalive_timeout", 120.0),
    ({"max_open": 64}, "max_open", 64), ({}, "keepalive_timeout", 75.0), ({}, "max_head_bytes", 65536),
])
def test_the_section_reads_durations_and_sizes(doc, field_, expected):
    assert getattr(ConnectionSettings.from_doc(doc), field_) == expected


def test_a_client_provoked_error_is_logged_once_per_cause_and_interval_then_says_how_many_were_held(caplog):
    clock, metrics = [100.0], Metrics()
    limit = ErrorLogLimit(metrics, interval=10.0, clock=lambda: clock[0])
    server = logging.getLogger("aiohttp.server")
    limit.install()
    try:
        with caplog.at_level(logging.ERROR, logger="aiohttp.server"):
            for i in range(50):  # what aiohttp writes for each malformed head, and one other cause
                try:
                    raise ValueError(f"Invalid header token {i}")
                except ValueError:
                    server.exception("Error handling request from %s", "127.0.0.1")
            server.error("Missing return statement on request handler")
            clock[0] += 10.5
            server.exception("Error handling request from %s", "127.0.0.1", exc_info=ValueError("again"))
    finally:
        limit.uninstall()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["Error handling request from 127.0.0.1", "Missing return statement on request handler",
                     "Error handling request from 127.0.0.1 (49 more like this in the last 10 s not logged)"]
    assert metrics.log_lines_held_back.labels("aiohttp.server")._value.get() == 49
