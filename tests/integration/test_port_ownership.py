"""A second alertd of another installation cannot share a running alertd's port; the receivers of one
installation still do.

Before, each receiver bound the port with SO_REUSEPORT, and so did the second installation's: the kernel
spread the webhooks over both (4 of 8 each) and both opened INC-1. Two real process groups here.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.alertd_proc import REPO, AlertdProcess
from testkit.webhooks import UniqueWebhooks


def second_installation(tmp: Path, listen: str, receivers: int) -> subprocess.CompletedProcess:
    """Another alertd (own data directory, own installation) on the same address; it must exit at start."""
    return subprocess.run([sys.executable, "-m", "alertd.cli.main", "serve", "--listen", listen,
                           "--data-dir", str(tmp / "data"), "--receivers", str(receivers)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def test_another_installation_is_refused_the_port_and_the_receivers_share_it(tmp_path: Path) -> None:
    first = AlertdProcess(tmp_path / "first", {}, serve_args=["--receivers", "2"]).start()
    try:
        for receivers in (1, 0):
            other = second_installation(tmp_path / f"second-{receivers}", first.address, receivers)
            assert other.returncode == 2, other
            assert "address already in use" in other.stderr.lower(), other.stderr
        gen = UniqueWebhooks(run="port", nodes=8, nodes_per_cluster=2, seed=3)
        for _ in range(8):  # fresh connections: the kernel hands them to either receiver
            assert first.post(gen.next())[0] == 200
        first.wait_drained(30)
        status, data = first.get_json("/api/v1/incidents?limit=100")
        assert status == 200 and len(data["incidents"]) == 8  # every webhook reached this installation
        children = subprocess.run(["pgrep", "-P", str(first.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 2, "both receivers run on the one port"
    finally:
        first.stop()
