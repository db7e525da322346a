"""End to end in-process: webhook in -> store -> engine -> incident, for what the GPU itself asks for (Xid 154)
and for NVSwitch faults (SXid), with the shipped rules.

Line formats, as published:
- Xid 154: NVIDIA's Xid catalog (row 154, GPU_RECOVERY_ACTION_CHANGED) gives the text "GPU recovery action
  changed from 0x0 (None) to 0x2 (Node Reboot Required)"; the kernel writes it behind the usual
  "NVRM: Xid (PCI:dddd:bb:dd): 154, " prefix (public GPU bug reports). DCGM exports the value as field 1523,
  DCGM_FI_DEV_GPU_RECOVERY_ACTION (NVML nvmlDeviceGpuRecoveryAction_t: 2 is a node reboot).
- SXid: "nvidia-nvswitchN: SXid (PCI:<address>): <code>, <Fatal|Non-fatal>, <error>" as the NVSwitch driver
  writes it (NVIDIA's Xid documentation, "What Is an SXid Message"; the Fabric Manager User Guide), lines as
  published HGX kernel logs show them.

The kernel log comes from the Graylog REST test server (testkit/graylog_server.py), which follows
Graylog's documented search contract.
"""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from aiohttp.test_utils import TestClient, TestServer

from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.enrich import Enricher
from alertd.rules.ruleset import load_rules
from alertd.store.sqlite import SqliteStore
from testkit.fakes import Recorder
from testkit.graylog_server import GraylogTestServer, graylog_message
from testkit.served import served
from testkit.webhooks import FIRING_END, fingerprint, iso, webhook

ROOT = Path(__file__).resolve().parents[2]
HOOK = "/api/v1/alerts/alertmanager"
T = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=20)
REBOOT = ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
          "(Node Reboot Required)")
FATAL_SXID = "nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 20034, Fatal, Link 27 LTSSM Fault Up"


class Stack:
    """Service + HTTP app (+ enricher when logs are given), started in-process."""

    def __init__(self, tmp_path: Path, enrich: dict[str, Any] | None = None):
        doc: dict[str, Any] = {"rules": {"paths": [str(ROOT / "rules")]}, "report": {"sample_fleet": False}}
        if enrich is not None:
            doc["enrich"] = enrich
        cfg = parse_config(doc, "test")
        self.enricher = Enricher.from_settings(cfg.enrich) if enrich is not None else None
        self.recorder = Recorder()
        self.svc = Service(cfg, SqliteStore(tmp_path / "alertd.sqlite3"), load_rules(cfg.rule_paths),
                           notifiers={"console": self.recorder}, enricher=self.enricher)
        self.client = TestClient(TestServer(served(self.svc), host="127.0.0.1"))

    async def __aenter__(self) -> "Stack":
        await self.client.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def post(self, doc: dict[str, Any]) -> None:
        resp = await self.client.post(HOOK, json=doc)
        assert resp.status == 200, await resp.text()

    async def incidents(self, want: Callable[[list[dict[str, Any]]], bool], timeout: float = 10.0) -> list[dict]:
        """Every incident in full, once ``want`` holds for them (bounded wait)."""
        deadline, rows = time.monotonic() + timeout, []
        while time.monotonic() < deadline:
            listed = (await (await self.client.get("/api/v1/incidents")).json())["incidents"]
            rows = [await (await self.client.get(f"/api/v1/incidents/{r['id']}")).json() for r in listed]
            if want(rows):
                return rows
            await asyncio.sleep(0.05)
        raise AssertionError(f"incidents not as expected in {timeout} s: {[(r['title'], r['severity']) for r in rows]}")


def an_alert(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"cluster": "prod-gpu-1", **labels}
    return {"status": "firing", "labels": labels, "annotations": annotations or {}, "startsAt": iso(T),
            "endsAt": FIRING_END, "generatorURL": "http://prometheus.example:9090/graph?g0.expr=up",
            "fingerprint": fingerprint(labels)}


def xid_alert(node: str, code: int, **labels: str) -> dict[str, Any]:
    """dcgm-exporter's Xid alert labels (GPUXidError of deploy/prometheus)."""
    return an_alert({"alertname": "GPUXidError", "severity": "critical", "node": node, "xid": str(code), "gpu": "3",
                     "UUID": "GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab", "pci_bus_id": "00000000:3B:00.0",
                     "Hostname": "nvidia-dcgm-exporter-x7k2p", **labels})


async def test_an_xid_154_asking_for_a_node_reboot_makes_the_action_reboot_node(tmp_path: Path) -> None:
    """The DCGM value in a label (a rule joining DCGM_FI_DEV_GPU_RECOVERY_ACTION into the Xid alert)."""
    async with Stack(tmp_path) as st:
        await st.post(webhook([xid_alert("gpu-node-1", 154, gpu_recovery_action="2", severity="warning")],
                              cluster="prod-gpu-1", node="gpu-node-1"))
        (inc,) = await st.incidents(lambda rows: len(rows) == 1)
        assert inc["primary"]["action"] == "reboot_node" and inc["primary"]["detail"] == "node_reboot"
        assert inc["severity"] == "critical" and inc["xids"] == [154]
        assert inc["title"].startswith("Xid 154: GPU asks for recovery: Node Reboot Required on gpu-node-1")


async def test_an_sxid_log_alert_gives_an_nvswitch_incident_of_its_own(tmp_path: Path) -> None:
    """A Loki / Graylog alert on the kernel log carries the SXid line; the node's GPU Xid stays apart."""
    async with Stack(tmp_path) as st:
        sxid = an_alert({"alertname": "KernelNVSwitchError", "severity": "warning", "node": "gpu-node-4",
                         "device": "nvidia-nvswitch2"}, {"summary": "NVSwitch error on gpu-node-4",
                                                          "description": f"kernel: {FATAL_SXID}"})
        await st.post(webhook([xid_alert("gpu-node-4", 79), sxid], cluster="prod-gpu-1", node="gpu-node-4"))
        rows = await st.incidents(lambda rows: len(rows) == 2)
        switch = next(r for r in rows if r["signals"] == ["sxid"])
        gpu = next(r for r in rows if r["signals"] == ["xid"])
        assert switch["title"] == "SXid 20034 on nvswitch2: LTSSM fault up (fatal) on gpu-node-4"
        assert switch["severity"] == "critical" and switch["primary"]["action"] == "reboot_node"
        assert switch["primary"]["sxid"] == 20034 and switch["primary"]["switch"] == "nvswitch2@0000:c4:00"
        assert switch["xids"] == [] and "xid" not in switch["primary"]
        assert switch["group"] == "nvswitch" and gpu["xids"] == [79]


async def test_the_kernel_logs_xid_154_upgrades_an_exporter_down_incident_to_a_reboot(tmp_path: Path) -> None:
    """DCGM is blind (its exporter is down); the node's kernel log in Graylog holds the GPU's own request."""
    server = GraylogTestServer(users={"alertd": "s3cret"})
    server.add(graylog_message("gpu-node-2", T - timedelta(seconds=90), REBOOT))
    server.add(graylog_message("gpu-node-2", T - timedelta(seconds=80), FATAL_SXID))
    await server.start()
    try:
        enrich = {"deadline": "3s", "write_delay": "20ms",
                  "logs": {"backend": "graylog", "urls": [server.url], "timeout": "5s",
                           "auth": {"basic": {"username": "alertd", "password": "s3cret"}}}}
        async with Stack(tmp_path, enrich) as st:
            down = an_alert({"alertname": "DCGMExporterDown", "severity": "warning", "node": "gpu-node-2",
                             "job": "dcgm-exporter"}, {"summary": "dcgm-exporter on node gpu-node-2 is down"})
            await st.post(webhook([down], cluster="prod-gpu-1", node="gpu-node-2"))
            (inc,) = await st.incidents(lambda rows: bool(rows) and rows[0]["primary"].get("xid") == 154)
            assert inc["primary"]["action"] == "reboot_node" and inc["severity"] == "critical"
            evidence = inc["annotations"]["log_evidence"]
            assert [(e["xid"], e.get("sxid")) for e in evidence] == [(154, None), (None, 20034)]
    finally:
        await server.stop()
