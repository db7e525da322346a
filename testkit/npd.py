"""The real node-problem-detector (built by scripts/build-npd.sh) against the real kube-apiserver.

Standalone mode, as NPD documents it for a node outside a cluster's pods: ``--apiserver-override`` with
``inClusterConfig=false`` and a kubeconfig (``auth=``), ``--hostname-override`` naming the node. Its system
log monitor is the shipped deploy/node-problem-detector/kernel-monitor-gpu.json with the ``filelog`` plugin
pointed at a file the test appends kernel lines to, in the syslog form NPD's own
config/kernel-monitor-filelog.json reads ("Dec  6 04:40:01 host kernel: [1234.567890] NVRM: ...").
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from testkit.kube_apiserver import KubeAPIServer
from testkit.process import (INSTALL_COMMAND, RunningService, ServiceUnavailable, free_ports, runtime_dir,
                                   spawn, wait_ready)

CACHE_DIR = Path(os.environ.get("ALERTD_CACHE") or Path.home() / ".cache" / "alertd-test")
NPD_VERSION = os.environ.get("ALERTD_NPD_VERSION") or "v0.8.20"
REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "deploy" / "node-problem-detector" / "kernel-monitor-gpu.json"


def npd_bin() -> Path:
    path = CACHE_DIR / f"npd-{NPD_VERSION}" / "bin" / "nodeproblemdetector"
    if not path.exists():
        raise ServiceUnavailable(f"{path} not built; run: {INSTALL_COMMAND}")
    return path


@dataclass
class NodeProblemDetector:
    proc: RunningService
    node: str
    kern_log: Path
    port: int

    def kernel(self, message: str, uptime: float = 5321.123456) -> None:
        """Append one kernel line, stamped now (UTC, as NPD runs with TZ=UTC), as syslog writes kern.log."""
        stamp = datetime.now(timezone.utc).strftime("%b %e %H:%M:%S")
        with self.kern_log.open("a") as f:
            f.write(f"{stamp} {self.node} kernel: [{uptime:12.6f}] {message}\n")

    def conditions(self) -> list[dict[str, object]]:
        """NPD's own view (its /conditions endpoint)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/conditions", timeout=5) as resp:
            answer: list[dict[str, object]] = json.loads(resp.read()) or []  # null until its first sync
            return answer

    def stop(self) -> None:
        self.proc.stop()


def start_npd(kube: KubeAPIServer, node: str, workdir: Path) -> NodeProblemDetector:
    binary = npd_bin()
    run, log, cleanups = runtime_dir("npd", workdir, None)
    kern_log = run / "kern.log"
    kern_log.touch()
    config = json.loads(SHIPPED.read_text())
    config.update(plugin="filelog", logPath=str(kern_log), pluginConfig={
        "timestamp": "^.{15}", "message": "kernel: \\[.*\\] (.*)", "timestampFormat": "Jan _2 15:04:05"})
    (run / "kernel-monitor-gpu.json").write_text(json.dumps(config))
    kubeconfig = kube.kubeconfig(run / "kubeconfig")
    port = free_ports(1)[0]
    proc = spawn("node-problem-detector", [
        binary, f"--config.system-log-monitor={run / 'kernel-monitor-gpu.json'}",
        f"--apiserver-override={kube.url}?inClusterConfig=false&auth={kubeconfig}",
        f"--hostname-override={node}", "--enable-k8s-exporter=true", "--event-namespace=default",
        "--address=127.0.0.1", f"--port={port}", "--prometheus-port=0", "--k8s-exporter-heartbeat-period=1m",
        "--apiserver-wait-timeout=30s", "--apiserver-wait-interval=1s"],
        port=port, log_path=log, cwd=run, env={**os.environ, "TZ": "UTC"}, cleanups=cleanups)
    npd = NodeProblemDetector(proc, node, kern_log, port)

    def ready() -> bool:
        try:
            return any(c.get("type") == "GPUXidError" for c in npd.conditions())
        except OSError:
            return False
    wait_ready(proc, ready, 60)
    time.sleep(0.5)  # the file watcher starts right after the HTTP server
    return npd


__all__ = ["NodeProblemDetector", "npd_bin", "start_npd"]
