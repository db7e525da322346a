"""pytest plugin with the real services, one instance per test session.

Load with ``-p tests.support.fixtures`` (or ``pytest_plugins`` in a conftest).

Fixtures ``postgres``, ``opensearch`` and ``elasticsearch`` each start their
service once per session on a free loopback port and stop it at session end;
they yield a :class:`testkit.services.RunningService` (``dsn`` for
PostgreSQL, ``url`` for the search servers). Prometheus and Alertmanager have
no session fixture: each end-to-end test starts its own with its own config
through :func:`require`.

A missing binary or distribution skips the test with the command that
installs it; when the ``CI`` environment variable is set it fails instead,
so a CI machine without the services cannot pass by skipping.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable, Iterator, TypeVar

import pytest

from testkit import services
from testkit.services import RunningService, ServiceUnavailable
from testkit.missing import missing_service

T = TypeVar("T")


def pytest_configure(config) -> None:
    # A SIGTERM (a CI time limit, a killed terminal) would skip atexit and leave
    # the services running: turn it into an exit that runs the teardowns.
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        def _terminate(signum, frame):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            services.stop_all()
            pytest.exit("terminated by SIGTERM; services stopped", returncode=128 + signum)
        signal.signal(signal.SIGTERM, _terminate)




def require(start: Callable[..., T], *args, **kwargs) -> T:
    """Call a ``services.start_*`` function, applying the missing-service policy."""
    try:
        return start(*args, **kwargs)
    except ServiceUnavailable as exc:
        missing_service(str(exc))
        raise  # not reached: skip and fail raise


def _session_service(tmp_path_factory, name: str, start) -> Iterator[RunningService]:
    svc = require(start, tmp_path_factory.mktemp(name))
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory) -> Iterator[RunningService]:
    """PostgreSQL with an empty ``alertd`` database; ``postgres.dsn``."""
    yield from _session_service(tmp_path_factory, "postgres", services.start_postgres)


@pytest.fixture(scope="session")
def opensearch(tmp_path_factory) -> Iterator[RunningService]:
    """OpenSearch 2.x, plain http, single node; ``opensearch.url``."""
    yield from _session_service(tmp_path_factory, "opensearch", services.start_opensearch)


@pytest.fixture(scope="session")
def elasticsearch(tmp_path_factory) -> Iterator[RunningService]:
    """Elasticsearch 8.x, security off, single node; ``elasticsearch.url``."""
    yield from _session_service(tmp_path_factory, "elasticsearch", services.start_elasticsearch)


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory):
    """A real kube-apiserver with etcd, RBAC and static tokens (testkit/kube_apiserver.py)."""
    from testkit.kube_apiserver import start_kube_apiserver

    server = require(start_kube_apiserver, tmp_path_factory.mktemp("kube"))
    try:
        yield server
    finally:
        server.stop()
