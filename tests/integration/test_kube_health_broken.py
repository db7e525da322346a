"""A kube-health watch that cannot reach its API server shows in /metrics at once and in /readyz after
``unready_after``; a follower, which runs no watch, stays ready. No API server runs here: the kubeconfig
points at a loopback port nothing listens on, as after a control-plane outage or a wrong address."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient, TestServer

from alertd.app.assemble import build_service
from alertd.config.settings import parse_config
from alertd.store.sqlite import SqliteStore
from testkit.process import free_ports
from testkit.served import served

ROOT = Path(__file__).resolve().parents[2]


def kubeconfig(path: Path) -> Path:
    port = free_ports(1)[0]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                 "insecure-skip-tls-verify": True}}],
        "users": [{"name": "alertd", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "alertd"}}]}))
    return path


async def answer(client: TestClient, path: str) -> tuple[int, str]:
    resp = await client.get(path)
    return resp.status, await resp.text()


async def test_a_broken_watch_is_in_metrics_and_then_readyz(tmp_path: Path) -> None:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]},
                        "enrich": {"kube": {"kubeconfig": str(kubeconfig(tmp_path / "kubeconfig")), "timeout": "1s"}},
                        "normalize": {"kubernetes": {"enabled": False}},
                        "sources": {"kube_health": {"enabled": True, "unready_after": "2s"}}}, "test")
    svc = build_service(cfg, SqliteStore(tmp_path / "alertd.sqlite3"))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        started = time.monotonic()
        status: Any = None
        while time.monotonic() - started < 20:
            status = await answer(client, "/readyz")
            if status[0] == 503:
                break
            await asyncio.sleep(0.2)
        assert status[0] == 503 and "kube-health" in status[1] and "watch failing" in status[1], status
        assert time.monotonic() - started >= 1.5  # not before unready_after
        metrics = (await answer(client, "/metrics"))[1]
        assert 'alertd_source_watch_up{watch="kube-health nodes"} 0.0' in metrics
        assert 'alertd_source_watch_up{watch="kube-health events"} 0.0' in metrics
        assert svc.kube_health is not None
        await svc.kube_health.stop()  # as when this process stops leading: a follower reads no watch
        assert (await answer(client, "/readyz"))[0] == 200
    finally:
        await client.close()
