"""`alertd serve --receivers 2` on SQLite: three processes on one port (SO_REUSEPORT), one engine.

Every acknowledged webhook is processed by the one engine, whichever process took it; actions
that land on a receiver process are carried out by the engine; the receivers die with it.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.alertd_proc import AlertdProcess
from tests.support.process import http
from tests.support.webhooks import UniqueWebhooks, dedup_keys


def test_receivers_share_the_port_and_feed_one_engine(tmp_path: Path) -> None:
    server = AlertdProcess(tmp_path / "alertd", {"log": {"level": "info"}}, serve_args=["--receivers", "2"]).start()
    try:
        roles: set[str] = set()
        deadline = time.monotonic() + 20
        while len(roles) < 2 and time.monotonic() < deadline:  # new connections land on different processes
            roles.add(http("GET", server.url + "/readyz", timeout=2)[2].decode().strip())
        assert roles == {"ready: leader", "ready: receiver"}, roles
        gen = UniqueWebhooks(run="rcv", nodes=30, nodes_per_cluster=3, seed=9)
        acked = []
        for _ in range(120):
            doc = gen.next()
            status, _, _ = server.post(doc)
            assert status == 200
            acked.append(doc)
        server.wait_drained(30)
        with server.db() as conn:
            done = dict(conn.execute("SELECT dedup, processed FROM inbox").fetchall())
        assert all(done.get(k) == 1 for d in acked for k in dedup_keys(d))
        status, data = server.get_json("/api/v1/incidents?limit=100")
        assert len({r["node"] for r in data["incidents"]}) == 30
        # Acknowledge every incident through fresh connections: most land on a receiver process.
        for row in data["incidents"]:
            status, _, body = http("POST", server.url + f"/api/v1/incidents/{row['id']}/ack", b"", timeout=5)
            assert status == 200, body
        status, data = server.get_json("/api/v1/incidents?status=acknowledged&limit=100")
        assert len(data["incidents"]) == 30
        children = child_pids(server.pid)
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)  # a receiver dies: the engine process starts another
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (children[0] in child_pids(server.pid) or len(child_pids(server.pid)) < 2):
            time.sleep(0.2)
        children = child_pids(server.pid)
        assert len(children) == 2
        os.kill(server.pid, signal.SIGKILL)  # the engine process alone: its receivers must follow
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(pid) for pid in children):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in children)
    finally:
        server.kill9()


def child_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if alive(int(p))]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
