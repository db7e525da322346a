"""The enricher inside a real Service (SQLite store, shipped rules), with in-process log and
Kubernetes backends: upgrade from the kernel log, deadline, down/slow/garbage backends,
when enrichment runs, fleet incidents. Across stops and restarts: test_enrich_resume.py."""
from __future__ import annotations

from alertd.core.incident_commands import Acknowledge
import asyncio
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest

from alertd.enrich.enricher import Enricher
from alertd.enrich.logs import LogsUnavailable
from alertd.enrich.settings import LogBatch, LogSettings, LogWindow
from alertd.app.service import Service
from testkit.enrich_harness import XID79, Harness, MemoryKube, alert, cluster_objects
from testkit.manual_timer import ManualTimer
from testkit.notify_harness import wait_for


async def test_metrics_missing_upgraded_to_xid79_with_owner(tmp_path) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=5)
    lines = {"gpu-node-2": ["NVRM: GPU at PCI:0000:3b:00: GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab", XID79,
                            "NVRM: Xid (PCI:0000:3b:00): 45, pid=1234, name=python, Ch 00000010"]}
    async with Harness(tmp_path, lines=lines, kube=MemoryKube(cluster_objects())) as h:
        h.backend.gate = asyncio.Event()  # the log answers once the incident was seen before its upgrade
        await h.send(alert("DCGMExporterDown", "gpu-node-2", now))
        inc = h.incident("gpu-node-2")
        assert inc.primary.kind == "metrics_missing"
        h.backend.gate.set()
        assert await h.enricher.wait_idle(10)
        inc = h.incident("gpu-node-2")
        assert inc.primary.title == "Xid 79: GPU has fallen off the bus"
        assert inc.title.startswith("Xid 79: GPU has fallen off the bus on gpu-node-2")
        assert inc.primary.detail == "from kernel log" and 79 in inc.xids
        ev = inc.annotations["log_evidence"]
        xid = next(e for e in ev if e["xid"] == 79)
        assert xid["pci"] == "0000:3b:00" and xid["gpu_uuid"] == "GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab"
        assert xid["host"] == "gpu-node-2" and xid["pid"] is None and xid["process"] is None
        assert next(e for e in ev if e["xid"] == 45)["process"] == "python"
        assert "logs_unavailable" not in inc.annotations
        owners = inc.annotations["owners"]
        assert owners == [{"kind": "PyTorchJob", "name": "llama", "namespace": "ml", "team": "ml-infra",
                           "channel": "#ml-oncall", "pods": 2, "gpus": 8}]
        pods = inc.annotations["pods"]
        assert {p["name"] for p in pods} == {"llama-worker-0", "llama-worker-1"}  # cpu-only pod left out
        assert pods[0]["owner_chain"] == [{"kind": "PyTorchJob", "name": "llama", "apiVersion": "kubeflow.org/v1"}]
        assert inc.annotations["kube_node"]["cordoned"] is True
        assert inc.annotations["node_events"][0]["reason"] == "NodeNotSchedulable"
        kinds = [e.kind for e in inc.timeline]
        assert "classification_upgraded" in kinds and "enrichment" in kinds
        # the stored incident (what GET /api/v1/incidents/{id} returns) has it too
        stored = await h.svc.store.get_incident(inc.id)
        assert stored.primary.xid == 79 and stored.annotations["owners"][0]["team"] == "ml-infra"

async def test_the_upgrade_and_the_log_lines_behind_it_are_one_change(tmp_path) -> None:
    """What enrichment found is written in one engine step: the stored incident and every notification show
    the Xid upgrade together with its log evidence, and the notifiers get one update, not one per key. No
    Kubernetes here: the node's context is a finding of its own, written when it arrives (on a loaded machine
    after the log search's), which is not what this test is about."""
    now = datetime.now(timezone.utc) - timedelta(minutes=5)
    async with Harness(tmp_path, lines={"gpu-node-2": [XID79]}) as h:
        await h.send(alert("DCGMExporterDown", "gpu-node-2", now))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("gpu-node-2")
        steps = [e for e in inc.timeline if e.kind in ("enrichment", "classification_upgraded")]
        assert {e.kind for e in steps} == {"enrichment", "classification_upgraded"}
        assert len({e.at for e in steps}) == 1, [(e.at, e.kind, e.text) for e in steps]
        await wait_for(lambda: any("classification_upgraded" in p["kinds"] for _, p in h.recorder.items))
        updates = [p for _, p in h.recorder.items if p["incident"]["id"] == inc.id and "opened" not in p["kinds"]]
        assert len(updates) == 1, [p["kinds"] for p in updates]
        assert {"enrichment", "classification_upgraded"} <= set(updates[0]["kinds"])
        assert updates[0]["incident"]["xids"] == [79]
        assert any(e["text"].startswith("kernel log: 1 line(s) from gpu-node-2") for e in updates[0]["events"])

async def test_code_unknown_xid_upgraded_from_the_kernel_log(tmp_path) -> None:
    """A site's Xid alert without a code ("Xid (code unknown)") gets its code from the node's kernel log."""
    async with Harness(tmp_path, lines={"n1": [XID79]}) as h:
        a = alert("SiteGpuXid", "n1", datetime.now(timezone.utc), gpu="0", pci_bus_id="00000000:3B:00.0",
                  UUID="GPU-1", severity="critical")
        a.annotations = {"summary": "GPU 0 on n1 reported an Xid"}
        a.generator_url = "http://prom:9090/graph?g0.expr=changes%28DCGM_FI_DEV_XID_ERRORS%5B5m%5D%29+%3E+0&g0.tab=1"
        h.backend.gate = asyncio.Event()  # the log answers once the incident was seen without its code
        await h.send(a)
        inc = h.incident("n1")
        assert inc.primary.kind == "xid" and inc.primary.xid is None and inc.title.startswith("Xid (code unknown) on n1")
        h.backend.gate.set()
        assert await h.enricher.wait_idle(10)
        inc = h.incident("n1")
        assert inc.primary.xid == 79 and inc.xids == [79]
        assert inc.title.startswith("Xid 79: GPU has fallen off the bus on n1")
        assert "classification_upgraded" in [e.kind for e in inc.timeline]
        stored = await h.svc.store.get_incident(inc.id)
        assert stored.primary.xid == 79

async def test_slow_backend_does_not_hold_the_notification(tmp_path) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=5)
    async with Harness(tmp_path, lines={"n1": [XID79]}, deadline=0.2) as h:
        h.backend.delay = 1.0
        t0 = time.monotonic()
        await h.send(alert("DCGMExporterDown", "n1", now))
        inc = h.incident("n1")
        await h.svc.outbox.drain()
        first = [t for t, p in h.recorder.items if p["kinds"][0] == "opened"]
        assert first and first[0] - t0 < 0.5  # routed and delivered before the search answered
        await asyncio.sleep(0.45)
        assert inc.annotations["logs_unavailable"] == "no answer within 0.2s (still searching)"
        assert "log_evidence" not in inc.annotations
        assert await h.enricher.wait_idle(10)
        assert "logs_unavailable" not in inc.annotations
        assert inc.annotations["log_evidence"][0]["xid"] == 79
        assert inc.primary.xid == 79
        await h.svc.outbox.drain()
        texts = [e.get("text", "") for _, p in h.recorder.items for e in p["events"]]
        assert "kernel log unavailable: no answer within 0.2s (still searching)" in texts
        assert "kernel log available again" in texts
        assert h.enricher.latencies and max(h.enricher.latencies) >= 1.0

async def test_search_timeout_marks_reason(tmp_path) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}, deadline=0.1, timeout=0.3) as h:
        h.backend.delay = 5.0
        await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc)))
        assert await h.enricher.wait_idle(10)
        assert h.incident("n1").annotations["logs_unavailable"] == "memory: no answer within 0.3s"

async def test_down_backend_marks_then_retries(tmp_path) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}, retry=(0.3,)) as h:
        h.backend.fail = LogsUnavailable("ConnectionError: connection refused")
        await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc) - timedelta(minutes=5)))
        await asyncio.sleep(0.15)
        inc = h.incident("n1")
        assert inc.annotations["logs_unavailable"] == "memory: ConnectionError: connection refused"
        assert inc.primary.kind == "metrics_missing"
        await h.svc.outbox.drain()
        assert h.recorder.items  # notified although logs are down
        h.backend.fail = None
        await asyncio.sleep(0.5)
        assert await h.enricher.wait_idle(10)
        assert "logs_unavailable" not in inc.annotations
        assert inc.primary.xid == 79

async def test_garbage_answer_marks_unavailable(tmp_path) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}) as h:
        h.backend.garbage = True
        await h.send(alert("DCGMExporterDown", "n1", datetime.now(timezone.utc)))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("n1")
        assert inc.annotations["logs_unavailable"] == "memory: backend answered the wrong number of results"
        assert inc.primary.kind == "metrics_missing"

async def test_kube_down_is_marked_and_logs_still_arrive(tmp_path) -> None:
    kube = MemoryKube(cluster_objects())
    from alertd.enrich.kube_api import KubeUnavailable

    kube.fail = KubeUnavailable("Kubernetes API: HTTP 403: forbidden")
    async with Harness(tmp_path, lines={"gpu-node-2": [XID79]}, kube=kube) as h:
        await h.send(alert("DCGMExporterDown", "gpu-node-2", datetime.now(timezone.utc)))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("gpu-node-2")
        assert inc.annotations["kube_unavailable"] == "Kubernetes API: HTTP 403: forbidden"
        assert inc.primary.xid == 79 and "owners" not in inc.annotations

async def test_only_opened_and_new_nodes_are_enriched(tmp_path) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=1)
    async with Harness(tmp_path, lines={"n1": [XID79]}) as h:
        await h.send(alert("DCGMExporterDown", "n1", now))
        assert await h.enricher.wait_idle(10)
        queries = h.searcher.stats.queries
        assert queries == 1
        # another alert on the same node joins the incident: no new enrichment
        await h.send(alert("GPUTemperatureHigh", "n1", now + timedelta(seconds=20), gpu="3"))
        assert await h.enricher.wait_idle(10)
        assert h.searcher.stats.queries == queries
        assert len(h.svc.engine.state.incidents) == 1
        # nor does an acknowledgement
        await h.svc.run(Acknowledge(h.incident("n1").id, "alice"))
        assert await h.enricher.wait_idle(10)
        assert h.searcher.stats.queries == queries and h.backend.requests == 1

async def test_gpu_specific_incident_ignores_other_gpus(tmp_path) -> None:
    other = "NVRM: Xid (PCI:0000:86:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    async with Harness(tmp_path, lines={"n1": [other]}) as h:
        await h.send(alert("GPUTemperatureHigh", "n1", datetime.now(timezone.utc), gpu="0",
                           pci_bus_id="00000000:3B:00.0", UUID="GPU-1"))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("n1")
        assert inc.primary.kind == "thermal" and not inc.xids
        assert inc.annotations["log_evidence"][0]["pci"] == "0000:86:00"  # still shown as context

async def test_no_upgrade_for_an_xid_the_incident_has(tmp_path) -> None:
    async with Harness(tmp_path, lines={"n1": [XID79]}) as h:
        await h.send(alert("GPUXidError", "n1", datetime.now(timezone.utc), xid="79", gpu="0",
                           pci_bus_id="00000000:3B:00.0"))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("n1")
        assert inc.primary.xid == 79 and inc.primary.detail == ""
        assert "evidence_signals" not in inc.annotations
        assert inc.annotations["log_evidence"][0]["xid"] == 79

async def test_fleet_incident_gets_each_joining_node(tmp_path) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=2)
    nodes = [f"n{i}" for i in range(8)]
    async with Harness(tmp_path, lines={n: [XID79] for n in nodes}) as h:
        for n in nodes:
            await h.send(alert("DCGMExporterDown", n, now))
        assert await h.enricher.wait_idle(10)
        fleet = next(i for i in h.svc.engine.state.incidents.values() if i.fleet)
        hosts = {e["host"] for e in fleet.annotations["log_evidence"]}
        assert hosts == set(nodes)
        # one search per node+window, whichever incidents asked
        assert h.searcher.stats.searched == len(nodes)
        for n in nodes[:4]:
            assert h.incident(n).annotations["log_evidence"][0]["host"] == n

async def test_nodes_the_kernel_log_upgraded_before_the_storm_formed_are_in_the_fleet(tmp_path) -> None:
    """The first nodes' searches answer (Xid 79: each node incident upgraded) before the other nodes' exporters
    go down: the node-lost storm those start stands for the Xid once its own nodes are upgraded, and the
    first three join it, with their lines."""
    now = datetime.now(timezone.utc) - timedelta(minutes=2)
    nodes = [f"n{i}" for i in range(8)]
    async with Harness(tmp_path, lines={n: [XID79] for n in nodes}) as h:
        for i, n in enumerate(nodes):
            await h.send(alert("DCGMExporterDown", n, now))
            if i == 2:
                assert await h.enricher.wait_idle(10)
                assert all(h.incident(n).primary.xid == 79 for n in nodes[:3])
        assert await h.enricher.wait_idle(10)
        [fleet] = [i for i in h.svc.engine.state.incidents.values() if i.fleet]
        assert sorted(fleet.nodes) == nodes
        assert {e["host"] for e in fleet.annotations["log_evidence"]} == set(nodes)
        assert fleet.primary.xid == 79


def test_from_config() -> None:
    assert Enricher.from_doc(None) is None
    assert Enricher.from_doc({"enabled": False, "logs": {"backend": "opensearch"}}) is None
    e = Enricher.from_doc({"logs": {"backend": "graylog", "url": "http://127.0.0.1:9000", "auth": {"token": "t"}},
                              "deadline": "2s"})
    assert e is not None and e.settings.deadline == 2.0 and e.searcher.backend.name == "graylog"
    assert e.kube is None

@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])

def test_from_config_search_backends(backend) -> None:
    e = Enricher.from_doc({"logs": {"backend": backend, "urls": ["http://127.0.0.1:9200"]},
                              "kube": {"kubeconfig": "/nonexistent"}})
    assert e.searcher.backend.name == backend and e.kube is not None

async def test_open_window_is_searched_again_when_it_closes(tmp_path) -> None:
    async with Harness(tmp_path, lines={}, timer=ManualTimer()) as h:
        h.searcher.settings = h.settings = LogSettings(
            backend="opensearch", batch=LogBatch(linger=0.01), timeout=2.0, ingest_lag=timedelta(milliseconds=100),
            window=LogWindow(before=timedelta(minutes=1), after=timedelta(seconds=1), align=timedelta(0)))
        h.enricher.settings = msgspec.structs.replace(h.enricher.settings, logs=h.settings)
        await h.send(alert("DCGMExporterDown", "n1", h.timer.wall()))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("n1")
        assert inc.annotations["log_evidence"] == [] and inc.primary.kind == "metrics_missing"
        h.backend.lines["n1"] = [XID79]  # the line was indexed a moment after the first search
        assert h.enricher.counts["rechecks"] == 0
        await h.timer.advance(2.5)
        assert await h.enricher.wait_idle(10)
        assert inc.annotations["log_evidence"][0]["xid"] == 79 and inc.primary.xid == 79
        assert h.enricher.counts["rechecks"] == 1 and h.backend.requests == 2

async def test_kube_failure_is_retried(tmp_path) -> None:
    from alertd.enrich.kube_api import KubeUnavailable

    kube = MemoryKube(cluster_objects())
    kube.fail = KubeUnavailable("Kubernetes API: HTTP 429: Too many requests")
    async with Harness(tmp_path, lines={}, kube=kube, retry=(0.3,)) as h:
        await h.send(alert("DCGMExporterDown", "gpu-node-2", datetime.now(timezone.utc) - timedelta(minutes=5)))
        await asyncio.sleep(0.15)
        inc = h.incident("gpu-node-2")
        assert inc.annotations["kube_unavailable"].endswith("Too many requests")
        kube.fail = None
        await asyncio.sleep(0.5)
        assert await h.enricher.wait_idle(10)
        assert "kube_unavailable" not in inc.annotations and inc.annotations["owners"][0]["team"] == "ml-infra"

async def test_exporter_pod_label_does_not_name_the_workload(tmp_path) -> None:
    objs = cluster_objects()
    objs[("Pod", "dcgm-exporter-abcde")] = {"metadata": {"name": "dcgm-exporter-abcde", "namespace": "gpu-operator"},
                                            "spec": {"nodeName": "gpu-node-2", "containers": [{}]},
                                            "status": {"phase": "Running"}}
    async with Harness(tmp_path, lines={}, kube=MemoryKube(objs)) as h:
        # dcgm alert scraped without honor_labels: pod/namespace are the exporter's own
        await h.send(alert("GPUTemperatureHigh", "gpu-node-2", datetime.now(timezone.utc), gpu="1", UUID="GPU-1",
                           pod="dcgm-exporter-abcde", namespace="gpu-operator"))
        assert await h.enricher.wait_idle(10)
        pods = h.incident("gpu-node-2").annotations["pods"]
        assert {p["name"] for p in pods} == {"llama-worker-0", "llama-worker-1"}

def test_shipped_deployment_example_config_is_valid(tmp_path) -> None:
    from tests.unit.test_deploy_defaults import deployment_config

    cfg = deployment_config(tmp_path)
    e = Enricher.from_settings(cfg.enrich)
    assert e.settings.logs.backend == "opensearch" and e.settings.logs.index == "graylog_*"
    assert e.kube is not None and e.settings.deadline == 3.0

class OnlyTheHost:
    """A Service seen through exactly the members of alertd/enrich/host.py's EnrichHost: enrichment must
    need nothing else from it (no engine, no state)."""

    __slots__ = ("_svc",)

    def __init__(self, svc: Service):
        self._svc = svc

    @property
    def rules(self) -> Any:
        return self._svc.rules

    @property
    def metrics(self) -> Any:
        return self._svc.metrics

    def open_incident(self, incident_id: str) -> Any:
        return self._svc.open_incident(incident_id)

    def fleet_children_on(self, fleet_id: str, node: str) -> Any:
        return self._svc.fleet_children_on(fleet_id, node)

    async def enrich(self, *args: Any, **kw: Any) -> Any:
        return await self._svc.enrich(*args, **kw)

async def test_enrichment_needs_only_the_host_protocol(tmp_path) -> None:
    async with Harness(tmp_path, lines={"gpu-node-2": [XID79]}) as h:
        h.enricher.bind(OnlyTheHost(h.svc))
        await h.send(alert("DCGMExporterDown", "gpu-node-2", datetime.now(timezone.utc) - timedelta(minutes=5)))
        assert await h.enricher.wait_idle(10)
        inc = h.incident("gpu-node-2")
        assert inc.primary.xid == 79 and inc.annotations["log_evidence"][0]["xid"] == 79
        assert h.svc.open_incident(inc.id) is inc and h.svc.open_incident("INC-none") is None
