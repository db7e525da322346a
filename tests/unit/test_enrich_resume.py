"""Enrichment across a stop, a restart and a failed write: what was pending is resumed by the next engine, what
was stored is kept, and nothing is searched twice that need not be."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from alertd.enrich.logs import LogsUnavailable
from alertd.store.base import StoreUnavailable
from testkit.enrich_harness import XID79, Harness, MemoryKube, alert, cluster_objects
from testkit.manual_timer import ManualTimer


async def test_stop_cancels_background_work(tmp_path) -> None:
    h = Harness(tmp_path, lines={"n1": [XID79]}, retry=(30.0,))
    await h.svc.start()
    h.backend.fail = LogsUnavailable("down")
    await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc)))
    await asyncio.sleep(0.2)
    assert h.enricher._tasks  # the retry is waiting
    await h.svc.stop()
    assert not h.enricher._tasks
    h.enricher.submit([])  # after close: ignored, no error


async def test_restart_enriches_only_the_node_that_joins(tmp_path) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=5)
    nodes = [f"n{i}" for i in range(7)]
    lines = {n: [XID79] for n in nodes}
    async with Harness(tmp_path, lines=lines) as h:
        for n in nodes[:6]:
            await h.send(alert("DCGMExporterDown", n, now))
        assert await h.enricher.wait_idle(10)
        fleet = next(i for i in h.svc.engine.state.incidents.values() if i.fleet)
        assert {e["host"] for e in fleet.annotations["log_evidence"]} == set(nodes[:6])
    async with Harness(tmp_path, lines=lines) as h2:  # same database: a restart
        await h2.send(alert("DCGMExporterDown", "n6", now))
        assert await h2.enricher.wait_idle(10)
        # n6's own node incident and the fleet it joins both ask for n6: one search serves both
        assert h2.searcher.stats.searched == 1 and h2.backend.batches == [["n6"]]
        fleet = next(i for i in h2.svc.engine.state.incidents.values() if i.fleet)
        assert {e["host"] for e in fleet.annotations["log_evidence"]} == set(nodes)


async def test_failed_write_is_retried(tmp_path, caplog) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}, timer=ManualTimer()) as h:
        h.backend.delay = 0.3
        await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc) - timedelta(minutes=5)))
        await h.svc.outbox.drain()
        real_commit = h.svc.store.commit_step

        async def disk_full(step):
            raise StoreUnavailable("OperationalError: database or disk is full")
        h.svc.store.commit_step = disk_full  # every engine commit fails for a while
        await asyncio.sleep(0.8)
        assert "could not write enrichment for INC-1, retrying" in caplog.text
        h.svc.store.commit_step = real_commit
        assert h.timer.sleeping == 1  # the retry, two seconds out
        await h.timer.advance(2.5)
        assert await h.enricher.wait_idle(10)
        stored = await h.svc.store.get_incident(h.incident("n1").id)
        assert stored.primary.xid == 79 and stored.annotations["log_evidence"][0]["xid"] == 79


async def test_enrichment_pending_at_a_stop_is_resumed_by_the_next_engine(tmp_path) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}, retry=(60,)) as h:
        h.backend.fail = LogsUnavailable("ConnectionError: connection refused")
        await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc) - timedelta(minutes=5)))
        await asyncio.sleep(0.15)
        assert "logs_unavailable" in h.incident("n1").annotations  # its retry waits in this process's memory
    async with Harness(tmp_path, lines={"n1": [XID79]}) as again:  # a restart, or a new leader
        assert await again.enricher.wait_idle(10)
        inc = again.incident("n1")
        assert "logs_unavailable" not in inc.annotations and inc.primary.xid == 79


async def test_a_kube_retry_pending_at_a_stop_is_resumed_and_the_stored_evidence_kept(tmp_path) -> None:
    """The kernel log was found, Kubernetes was down and its retry waited in the stopped engine's memory: the
    next engine asks Kubernetes again, and keeps the log evidence even with the log backend down by then."""
    from alertd.enrich.kube_api import KubeUnavailable

    down = MemoryKube(cluster_objects())
    down.fail = KubeUnavailable("Kubernetes API: HTTP 503: unavailable")
    async with Harness(tmp_path, lines={"gpu-node-2": [XID79]}, kube=down, retry=(60,)) as h:
        await h.send(alert("DCGMExporterDown", "gpu-node-2", datetime.now(timezone.utc) - timedelta(minutes=5)))
        await asyncio.sleep(0.3)
        ann = h.incident("gpu-node-2").annotations
        assert ann["kube_unavailable"].endswith("unavailable") and ann["log_evidence"][0]["xid"] == 79
    async with Harness(tmp_path, lines={"gpu-node-2": [XID79]}, kube=MemoryKube(cluster_objects())) as again:
        again.backend.fail = LogsUnavailable("ConnectionError: connection refused")
        assert await again.enricher.wait_idle(10)
        inc = again.incident("gpu-node-2")
        assert "kube_unavailable" not in inc.annotations and inc.annotations["owners"][0]["team"] == "ml-infra"
        assert inc.annotations["log_evidence"][0]["xid"] == 79 and "logs_unavailable" not in inc.annotations
        assert inc.primary.xid == 79
        stored = await again.svc.store.get_incident(inc.id)
        assert "kube_unavailable" not in stored.annotations and stored.annotations["log_evidence"][0]["xid"] == 79
