"""A stalled job with two replicas (docs/ha.md): an HA pair of Alertmanagers delivers the hang's alerts to
every replica, and the replicas share one store (SQLite shared by two processes' stores, and PostgreSQL).
The leader's engine takes each alert once: ONE job incident, its suspect the InfiniBand port that went down
first, and ONE page (the job's, which speaks for its suspect's)."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from alertd.app.assemble import build_service
from alertd.config.settings import parse_config
from alertd.core.model import JOB_SUSPECT, Alert
from alertd.engine.jobs import is_job
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.stores import make_store  # noqa: F401  (a fixture: SQLite and PostgreSQL)
from testkit.builders import fingerprint_of

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[2]
JOB = {"cluster": "prod", "namespace": "llm-pretrain", "owner_kind": "PyTorchJob", "owner_name": "llama-70b"}


def alert(name: str, starts: datetime, annotations: dict[str, str] | None = None, **labels: str) -> Alert:
    labels = {"alertname": name, **JOB, **labels}
    return Alert(fingerprint=fingerprint_of(labels), status="firing", labels=labels, annotations=annotations or {},
                 starts_at=starts, ends_at=None, received_at=starts)


def hang(now: datetime) -> list[Alert]:
    """What Prometheus fires: the port down a minute before the stall, then the stall on each node."""
    since = now - timedelta(minutes=3)
    port = alert("NodeInfiniBandPortDown", since - timedelta(minutes=1), node="gpu-b-0117", device="mlx5_2",
                 port="1", signal="link_degraded", severity="critical")
    stalls = [alert("GPUJobStalled", since + timedelta(seconds=150), {"stalled_since": f"{since.timestamp():.0f}"},
                    node=f"gpu-b-{n:04}", signal="job_stalled", severity="critical") for n in (115, 116, 117, 118)]
    return [port, *stalls]


async def wait_for(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while (found := await check()) is None or found is False:
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        await asyncio.sleep(0.05)
    return found


@pytest.fixture
async def pd():
    server = PagerDutyTestServer()
    await server.start()
    yield server
    await server.stop()


async def test_a_hangs_alerts_at_two_replicas_give_one_job_incident_and_one_page(make_store, pd, tmp_path):  # noqa: F811
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]},
                        "notify": {"pagerduty": {"events_url": pd.url, "routing_keys": {
                            "gpu-infra": pd.ROUTING_KEY, "gpu-infra-escalation": pd.ROUTING_KEY}}},
                        "ha": {"lease_ttl": "2s", "renew_interval": "500ms"}}, "test")
    replicas = [build_service(cfg, make_store(), role="replica") for _ in range(2)]
    for svc in replicas:
        await svc.start()
    try:
        leader = next(s for s in replicas if s.leading)
        now = datetime.now(timezone.utc)
        for svc in replicas:  # each Alertmanager of the pair delivers to every replica
            await svc.receive_alerts(hang(now))

        async def job_with_suspect() -> Any:
            assert leader.engine is not None
            jobs = [i for i in leader.engine.state.incidents.values() if is_job(i)]
            return jobs[0] if len(jobs) == 1 and len(jobs[0].nodes) == 4 and "suspect" in jobs[0].title else None

        job = await wait_for(job_with_suspect, "the job incident with its suspect")
        assert job.title.endswith("; suspect gpu-b-0117: InfiniBand port mlx5_2 down at "
                                  f"{now - timedelta(minutes=4):%H:%M}")
        assert [i.id for i in leader.engine.state.incidents.values() if is_job(i)] == [job.id]
        node = next(i for i in leader.engine.state.incidents.values() if i.node == "gpu-b-0117")
        assert node.annotations[JOB_SUSPECT] == job.id
        far = now + timedelta(days=1)

        async def delivered() -> bool:  # the job's page sent, and nothing (a held node page) left to send
            return bool(pd.alerts) and not await leader.store.due_outbox(far, 100)

        await wait_for(delivered, "the page, and every notification delivered")
        assert leader.metrics.duplicates._value.get() >= 5  # the second replica's copies, taken once
        paged = {key.rpartition(":")[2]: alerts for key, alerts in pd.alerts.items()}
        assert list(paged) == [job.id] and len(paged[job.id]) == 1, pd.alerts
    finally:
        for svc in replicas:
            await svc.stop()
