"""A storm of thousands of nodes: the work per node stays the same however many nodes the storm already
has (counted in lines of alertd's code run, not in wall time), and what the engine holds in memory per open
incident is bounded, less past the budget (processing.detailed_incidents)."""
from __future__ import annotations

import gc
import sys
import tracemalloc
import asyncio

import msgspec
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import FrameType
from typing import Any, Awaitable, Callable

from aiohttp.test_utils import TestClient, TestServer

from alertd.core.model import OPEN, Alert, Incident, Severity
from alertd.core.kube_findings import KubeNode
from alertd.enrich.annotations import LISTED_NODES, IncidentState, NodeFindings, annotation_values
from alertd.enrich.settings import EnrichSettings
from alertd.enrich.writer import PACE_NODES, AnnotationWriter
from alertd.engine.memory import hold
from testkit.enrich_harness import Harness, MemoryKube, alert
from testkit.served import served
from testkit.builders import at, engine, xid

ALERTD = str(Path(__file__).resolve().parents[2] / "alertd")


async def lines_run(work: Callable[[], Awaitable[Any]]) -> int:
    """Lines of alertd's own code that ``work`` runs on this thread: an operation count, the same on any machine."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if not frame.f_code.co_filename.startswith(ALERTD):
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        await work()
    finally:
        sys.settrace(None)
    return count


def xid_alerts(first: int, count: int, starts: datetime) -> list:
    """Each node's dcgm-exporter Xid 79 alert, as the shipped rules name and label it."""
    return [alert("GPUXidError", f"gpu-node-{i:05d}", starts, xid="79", gpu="0", UUID=f"GPU-{i:08x}",
                  pci_bus_id="00000000:3B:00.0", Hostname=f"gpu-node-{i:05d}") for i in range(first, first + count)]


async def cost_of_joining(tmp: Path, before: int, joining: int) -> float:
    """Lines run per node when ``joining`` nodes join a storm of ``before`` nodes, Kubernetes enrichment on."""
    h = Harness(tmp, kube=MemoryKube({}), logs=None)
    async with h:
        starts = datetime.now(timezone.utc) - timedelta(minutes=2)
        await h.send(*xid_alerts(0, before, starts))
        assert await h.enricher.wait_idle(60)
        lines = await lines_run(lambda: h.send(*xid_alerts(before, joining, starts)))
        [fleet] = [i for i in h.svc.engine.state.incidents.values() if i.fleet]
        assert len(fleet.nodes) == before + joining
        assert await h.enricher.wait_idle(60)
    return lines / joining


async def test_a_node_joining_a_storm_costs_the_same_in_a_storm_four_times_larger(tmp_path) -> None:
    small = await cost_of_joining(tmp_path / "small", 150, 50)
    large = await cost_of_joining(tmp_path / "large", 600, 50)
    assert large < small * 1.3, f"{small:.0f} lines per joining node in a storm of 150, {large:.0f} in one of 600"


def held_per_incident(nodes: int, budget: int) -> float:
    """Bytes the engine holds per open node incident of a storm (tracemalloc), after the processor's trim."""
    e = engine()
    alerts = []
    for i in range(nodes):
        a = xid(79, node=f"gpu-node-{i:05d}")
        a.fingerprint = f"{i:016x}"
        alerts.append(a)
    e.ingest(alerts[:8], at(0))  # the storm stands: later nodes join it
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(8, nodes, 256):
            changes = e.ingest(alerts[k:k + 256], at(k / 100))
            hold(e.state, [c.incident for c in changes], budget)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(e.state.incidents) == nodes + 1
    return held / (nodes - 8)


def test_memory_per_open_incident_is_bounded_and_smaller_past_the_budget() -> None:
    # The least of two runs each: tracemalloc also counts what a stray thread of the worker allocates meanwhile.
    detailed = min(held_per_incident(1500, budget=100_000) for _ in range(2))
    summarised = min(held_per_incident(1500, budget=100) for _ in range(2))
    assert detailed < 6000, f"{detailed:.0f} bytes per open node incident held in detail"
    assert summarised < 0.8 * detailed, f"{summarised:.0f} bytes summarised against {detailed:.0f} in detail"


async def test_past_the_budget_incidents_are_summarised_not_dropped(tmp_path) -> None:
    """Over budget, the storm's node incidents keep taking alerts and their whole story stays in the store."""
    h = Harness(tmp_path, kube=MemoryKube({}), logs=None)
    cfg = h.svc.processor.cfg
    cfg.processing = msgspec.structs.replace(cfg.processing, detailed_incidents=4)
    client = TestClient(TestServer(served(h.svc), host="127.0.0.1"))
    await client.start_server()
    try:
        starts = datetime.now(timezone.utc) - timedelta(minutes=2)
        await h.send(*xid_alerts(0, 12, starts))
        assert await h.enricher.wait_idle(60)  # its writes are steps too: none in flight while we look
        state = h.svc.engine.state
        children = [i for i in state.incidents.values() if i.parent_id]
        assert len(children) == 12 and set(state.summarised) == {c.id for c in children}
        assert all(not c.timeline for c in children)
        metrics = h.svc.metrics.exposition().decode()
        assert "alertd_incidents_summarised_open 12.0" in metrics
        assert "alertd_incidents_summarised_total 12.0" in metrics
        readyz = await client.get("/readyz")
        assert (readyz.status, await readyz.text()) == (
            200, "ready: leader\n12 open incidents held summarised in memory (past processing.detailed_incidents)\n")
        stored = await h.svc.store.get_incident(children[0].id)
        assert [e.kind for e in stored.timeline][:1] == ["opened"] and "folded_into_fleet" in {e.kind for e in stored.timeline}
        first = children[0]
        [fired] = first.members.values()
        ended = Alert(fired.fingerprint, "resolved", dict(fired.labels), {}, fired.starts_at, starts + timedelta(minutes=1),
                      received_at=datetime.now(timezone.utc))
        await h.send(ended)
        assert first.id in state.summarised and first.members[fired.fingerprint].status == "resolved"
        stored = await h.svc.store.get_incident(first.id)
        assert stored.members[fired.fingerprint].labels == fired.labels and "alert_resolved" in {e.kind for e in stored.timeline}
    finally:
        await client.close()


class WritesRecorded:
    """The enrichment host's write, recorded in order (the writer asks nothing else of it here)."""

    def __init__(self, ids: list[str]):
        self.incidents = {i: Incident(i, i, "node", "", Severity.WARNING, "other", OPEN, at(0), at(0)) for i in ids}
        self.writes: list[str] = []

    def open_incident(self, incident_id: str) -> Incident | None:
        return self.incidents.get(incident_id)

    async def enrich(self, incident_id: str, annotations: Any, signals: Any, source: str) -> list:
        self.writes.append(incident_id)
        return []


async def test_a_fleet_of_thousands_of_nodes_is_written_at_a_pace_its_size_sets() -> None:
    """Writing a fleet's annotations reads all of its nodes: written after every result, a storm costs its
    square. Its next write waits write_delay x nodes / PACE_NODES; a node incident's does not."""
    fleet = IncidentState(fleet=True, nodes=dict.fromkeys(f"gpu-node-{i:05d}" for i in range(50 * PACE_NODES)))
    states = {"INC-1": fleet, "INC-2": IncidentState(nodes={"gpu-node-00000": None})}
    host = WritesRecorded(list(states))
    values = iter(range(1000))
    writer = AnnotationWriter(states, lambda i: {"note": (next(values), "")}, service=lambda: host,
                              delay=lambda: 0.01, closed=lambda: False, later=lambda d, f: None, counts={})
    await writer.mark_dirty("INC-1")
    fleet_again, node = writer.mark_dirty("INC-1"), writer.mark_dirty("INC-2")  # the fleet's result came first
    await node
    assert host.writes == ["INC-1", "INC-2"]  # the node incident did not wait for the fleet's pace (0.5 s)
    await fleet_again
    assert host.writes == ["INC-1", "INC-2", "INC-1"]
    await writer.close()


def test_a_fleet_lists_the_kubernetes_state_of_its_first_nodes_each_node_incident_its_own() -> None:
    """A fleet incident of 20,000 nodes listing each one's Kubernetes state held and stored megabytes, rewritten
    at each enrichment pass; each node's own incident holds its state."""
    state = IncidentState(fleet=True, nodes=dict.fromkeys(f"gpu-node-{i:05d}" for i in range(LISTED_NODES + 50)))
    state.kube = {n: NodeFindings(KubeNode(n)) for n in state.nodes}
    values = annotation_values(state, EnrichSettings(), logs=False, kube=True)
    listed, text = values["kube_nodes"]
    assert isinstance(listed, list) and len(listed) == LISTED_NODES
    assert text == (f"Kubernetes state of {LISTED_NODES + 50} node(s), the first {LISTED_NODES} listed "
                    "(each node's incident has its own)")


async def test_a_large_api_answer_is_decoded_off_the_event_loop(monkeypatch) -> None:
    """A list of a 20,000-node cluster's nodes is megabytes of JSON: seconds of CPU that would stall /readyz."""
    import json
    import threading

    from alertd.enrich import kube_api

    nodes = {"kind": "NodeList", "items": [{"metadata": {"name": f"gpu-node-{i:05d}", "labels": {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}} for i in range(5000)]}
    threads: list[int] = []
    loads = json.loads
    monkeypatch.setattr(kube_api.json, "loads", lambda raw: threads.append(threading.get_ident()) or loads(raw))
    small = await kube_api.decode_json(json.dumps(nodes["items"][0]).encode())
    large = await kube_api.decode_json(json.dumps(nodes).encode())
    assert small == nodes["items"][0] and large == nodes
    assert threads[0] == threading.get_ident() and threads[1] != threading.get_ident()


async def test_a_storms_enrichment_targets_wait_in_a_queue_not_as_tasks(tmp_path) -> None:
    """Each node of a storm is two targets (its incident and the fleet's): as a task each, a storm of 20,000
    nodes held 40,000 coroutines waiting for the API server. At most IN_FLIGHT run; the rest are queued."""
    from alertd.enrich.enricher import IN_FLIGHT

    kube = MemoryKube({})
    answering = asyncio.Event()  # the API server answers nothing until the storm is in
    answer = kube._get

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await answering.wait()
        return await answer(*args, **kwargs)

    kube._get = slow  # type: ignore[method-assign]
    h = Harness(tmp_path, kube=kube, logs=None)
    async with h:
        starts = datetime.now(timezone.utc) - timedelta(minutes=2)
        await h.send(*xid_alerts(0, 2 * IN_FLIGHT, starts))
        running = [t for t in asyncio.all_tasks() if t.get_name() == "alertd-enrich" and not t.done()]
        assert len(running) == IN_FLIGHT and h.enricher.counts["targets"] == 4 * IN_FLIGHT
        answering.set()
        assert await h.enricher.wait_idle(60)
        assert h.enricher.counts["kube_ok"] == 4 * IN_FLIGHT  # every target enriched in the end
