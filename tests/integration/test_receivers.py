"""`alertd serve --receivers 2` on SQLite: two receiver processes on one port (the listening socket the engine
process bound and handed to them), one engine process that accepts no connection on it.

Every acknowledged webhook is processed by the one engine, whichever receiver took it; actions and
rule reloads sent to the port are carried out by the engine process; /metrics on the port shows the
whole group, whichever process answers; the receivers die with the engine process.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from testkit.alertd_proc import REPO, AlertdProcess, parse_metrics
from testkit.notify_harness import SECRET, Harness
from testkit.pipeline import wait
from testkit.process import http
from testkit.webhooks import FIRING_END, UniqueWebhooks, dedup_keys, fingerprint, iso, webhook


def test_receivers_share_the_port_and_feed_one_engine(tmp_path: Path) -> None:
    server = AlertdProcess(tmp_path / "alertd", {"log": {"level": "info"}}, serve_args=["--receivers", "2"]).start()
    try:
        roles = {http("GET", server.url + "/readyz", timeout=2)[2].decode().strip() for _ in range(12)}
        assert roles == {"ready: receiver"}, roles  # the engine process takes no connection
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
        metrics_dir = group_dir(children[0]) / "metrics"
        dead = children[0]
        assert list(metrics_dir.glob(f"gauge_live*_{dead}.db"))
        os.kill(dead, signal.SIGKILL)  # a receiver dies: the engine process starts another
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (dead in child_pids(server.pid) or len(child_pids(server.pid)) < 2):
            time.sleep(0.2)
        children = child_pids(server.pid)
        assert len(children) == 2
        # The dead receiver's counts stay in the group's sums; its live gauges left with it.
        wait_ready_on(server, children)
        assert scrape(server)["alertd_webhooks_received_total"] == 120
        assert not list(metrics_dir.glob(f"gauge_live*_{dead}.db")) and (metrics_dir / f"counter_{dead}.db").exists()
        os.kill(server.pid, signal.SIGKILL)  # the engine process alone: its receivers must follow
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(pid) for pid in children):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in children)
    finally:
        server.kill9()
        if "metrics_dir" in locals():  # killed -9 on purpose: nothing removed the group's directory
            shutil.rmtree(metrics_dir.parent, ignore_errors=True)


def child_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if alive(int(p))]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_receivers_answer_readyz_for_the_engine_process(tmp_path: Path) -> None:
    """The engine process binds no port, so its receivers answer /readyz for the group: a failure the engine
    reports, or an engine process that stopped reporting (stopped with SIGSTOP here), makes them unready
    while they keep taking webhooks; once it runs again they are ready and what they took is processed."""
    server = AlertdProcess(tmp_path / "alertd", {"log": {"level": "warning"}}, serve_args=["--receivers", "1"]).start()
    stopped = False
    try:
        assert http("GET", server.url + "/readyz", timeout=2)[:3:2] == (200, b"ready: receiver\n")
        health = group_dir(child_pids(server.pid)[0]) / "engine-health"
        os.kill(server.pid, signal.SIGSTOP)
        stopped = True
        health.write_text("store failing: OperationalError: disk I/O error")  # as the engine would write it
        status, _, body = http("GET", server.url + "/readyz", timeout=2)
        assert (status, body) == (503, b"engine process: store failing: OperationalError: disk I/O error\n")
        gen = UniqueWebhooks(run="stall", nodes=3, nodes_per_cluster=3, seed=5)
        docs = [gen.next() for _ in range(3)]
        for doc in docs:  # unready is not refusing: the receiver still stores what it is sent
            assert server.post(doc)[0] == 200
        body = wait("the receiver to see the engine's report go stale",
                    lambda: (r := http("GET", server.url + "/readyz", timeout=2))[0] == 503
                    and b"has not reported" in r[2] and r[2], timeout=25)
        assert body.startswith(b"engine process has not reported for 1") and b"stalled or stopped" in body, body
        os.kill(server.pid, signal.SIGCONT)
        stopped = False
        wait("the receiver ready again", lambda: http("GET", server.url + "/readyz", timeout=2)[0] == 200, timeout=10)
        server.wait_drained(30)
        with server.db() as conn:
            done = dict(conn.execute("SELECT dedup, processed FROM inbox").fetchall())
        assert all(done.get(k) == 1 for d in docs for k in dedup_keys(d))
    finally:
        if stopped:
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


def test_the_port_serves_the_whole_group(tmp_path: Path) -> None:
    """Metrics summed over the processes, no engine socket on the port, /-/reload reaching the engine's rules."""
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules, ignore=shutil.ignore_patterns("tests"))
    cfg = {"log": {"level": "info"}, "rules": {"paths": [str(rules)], "watch_interval": "0"}, "notify": {"slack": {"signing_secret": SECRET}}}
    server = AlertdProcess(tmp_path / "alertd", cfg, serve_args=["--receivers", "2"]).start()
    try:
        children = child_pids(server.pid)
        assert len(children) == 2
        wait_ready_on(server, children)  # start() returns when the first receiver answers
        group = group_dir(children[0])  # now: a receiver may be replaced later and take its /proc entry along
        on_port = port_sockets(server.port)
        assert on_port.listening <= set().union(*(socket_inodes(c) for c in children))

        gen = UniqueWebhooks(run="met", nodes=12, nodes_per_cluster=3, seed=4)
        docs = [gen.next() for _ in range(36)]
        for doc in docs:
            assert server.post(doc)[0] == 200
        server.wait_drained(30)
        expected = {"alertd_webhooks_received_total": 36.0, "alertd_alerts_received_total": float(sum(len(d["alerts"]) for d in docs)),
                    'alertd_incidents{state="open"}': 12.0, "alertd_incidents_opened_total": 12.0,
                    "alertd_engine_leader": 1.0, "alertd_inbox_pending": 0.0}
        deadline = time.monotonic() + 10  # the pending gauge is set by the engine's next round
        while scrape(server).get("alertd_inbox_pending") != 0.0 and time.monotonic() < deadline:
            time.sleep(0.2)
        for _ in range(8):  # fresh connections: the kernel picks a receiver each time
            metrics = scrape(server)
            assert {k: metrics.get(k) for k in expected} == expected
            assert metrics["alertd_store_bytes"] > 0 and metrics["alertd_webhook_ack_seconds_count"] == 36
        # The engine process holds the group's listening socket (it bound it, so no other alertd can join the
        # port: app/listener.py) but never accepts on it: no connection on the public port is the engine's.
        sockets = port_sockets(server.port)
        assert not (sockets.all - sockets.listening) & socket_inodes(server.pid)

        # A rule added on disk and reloaded through the port changes how the ENGINE classifies.
        assert signals_of(server, probe(server, "probe-a")) == ["other"]
        (rules / "00-site.yml").write_text("signals:\n  - kind: nonsense\n")
        status, _, body = http("POST", server.url + "/-/reload", b"", timeout=30)
        assert status == 500 and b"00-site.yml" in body, body
        (rules / "00-site.yml").write_text(SITE_RULE)
        status, _, body = http("POST", server.url + "/-/reload", b"", timeout=30)
        assert status == 200, body
        assert signals_of(server, probe_b := probe(server, "probe-b")) == ["thermal"]

        # The other public routes, from receivers: UI pages, a Slack button, health.
        for path in (f"/ui/incidents/{probe_b}", "/ui/incidents", "/ui/nodes/probe-b", "/api/v1/gpus", "/healthz"):
            status, _, body = http("GET", server.url + path, timeout=10)
            assert status == 200, (path, body[:200])
        click = Harness.action_body("alertd_ack", probe_b, user=("U0ANA", "ana"))
        assert http("POST", server.url + "/api/v1/slack/actions", click, Harness.signed(click), timeout=5)[0] == 200
        deadline = time.monotonic() + 10
        while server.get_json(f"/api/v1/incidents/{probe_b}")[1]["status"] != "acknowledged":
            assert time.monotonic() < deadline, "the Slack button did not reach the engine"
            time.sleep(0.2)
        assert server.get_json(f"/api/v1/incidents/{probe_b}")[1]["acknowledgedBy"] == "ana (slack:U0ANA)"
        # SIGHUP to the engine process (what a service manager sends) reloads the group too.
        (rules / "00-site.yml").write_text(SITE_RULE.replace("thermal", "ecc").replace("hardware", "memory"))
        sighup_at = time.time()
        os.kill(server.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while signals_of(server, probe(server, f"probe-c{int(time.monotonic() * 1000)}")) != ["ecc"]:
            assert time.monotonic() < deadline, "the engine did not reload its rules on SIGHUP"
            time.sleep(0.5)
        while scrape(server)["alertd_rules_last_reload_success_timestamp_seconds"] < sighup_at:  # the oldest
            assert time.monotonic() < deadline, "a process of the group did not reload on SIGHUP"
            time.sleep(0.2)
        with server.db() as conn:
            reloads = conn.execute("SELECT outcome FROM audit WHERE action = 'reload' ORDER BY id").fetchall()
        assert [r[0] for r in reloads] == ["failed", "ok", "ok"]  # once per request or signal, not once per process
        assert group.is_dir()
        assert server.terminate() == 0  # a clean stop removes the group's directory
        assert group.is_dir() is False
    finally:
        server.kill9()


SITE_RULE = """signals:
  - kind: thermal
    match:
      - 'alertname="SiteGpuProbe"'
    severity: warning
    category: hardware
    runbook: thermal
"""


def probe(server: AlertdProcess, node: str) -> str:
    """Send one site alert for ``node``; the id of the incident the engine made of it."""
    labels = {"alertname": "SiteGpuProbe", "severity": "warning", "cluster": "site", "node": node, "job": "site-probe"}
    alert = {"status": "firing", "labels": labels, "annotations": {"summary": f"site probe failed on {node}"},
             "startsAt": iso(datetime.now(timezone.utc)), "endsAt": FIRING_END, "generatorURL": "",
             "fingerprint": fingerprint(labels)}
    assert server.post(webhook([alert], cluster="site", node=node))[0] == 200
    server.wait_drained(30)
    status, data = server.get_json(f"/api/v1/incidents?node={node}")
    assert status == 200 and len(data["incidents"]) == 1, data
    return data["incidents"][0]["id"]


def signals_of(server: AlertdProcess, incident_id: str) -> list[str]:
    status, inc = server.get_json(f"/api/v1/incidents/{incident_id}")
    assert status == 200, inc
    return inc["signals"]


def scrape(server: AlertdProcess) -> dict[str, float]:
    status, _, body = http("GET", server.url + "/metrics", timeout=5)
    assert status == 200
    return parse_metrics(body.decode())


def wait_ready_on(server: AlertdProcess, pids: list[int], timeout: float = 20) -> None:
    """Until every receiver in ``pids`` listens on the port (a restarted one takes a few seconds to start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(port_sockets(server.port).listening & socket_inodes(pid) for pid in pids):
            return
        time.sleep(0.2)
    raise AssertionError(f"receivers {pids} not listening on {server.port}")


@dataclass
class PortSockets:
    listening: set[str]
    all: set[str]


def port_sockets(port: int) -> PortSockets:
    """Socket inodes bound to local ``port`` (IPv4 and IPv6), from the kernel's tables."""
    out = PortSockets(set(), set())
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                out.all.add(fields[9])
                if fields[3] == "0A":  # TCP_LISTEN
                    out.listening.add(fields[9])
    return out


def group_dir(receiver_pid: int) -> Path:
    """The group's directory, from a receiver's environment (the engine process hands it over there)."""
    environ = dict(v.split(b"=", 1) for v in Path(f"/proc/{receiver_pid}/environ").read_bytes().split(b"\0") if v)
    return Path(environ[b"ALERTD_CONTROL_SOCKET"].decode()).parent


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds open."""
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def test_a_killed_groups_directory_is_removed_by_the_next_group(tmp_path: Path) -> None:
    """kill -9 skips the engine process's removal of its group directory (metrics files, control socket):
    the next group started on the machine removes it, and leaves a live group's alone."""
    # The control socket's path must fit AF_UNIX's 107 bytes: a TMPDIR under tmp_path (deeper still under an
    # xdist worker's popen-gwN) does not, so the groups' temp dir is a short private one.
    with tempfile.TemporaryDirectory(prefix="alertd-") as short:
        _groups_in_a_fresh_tmpdir(tmp_path, Path(short))


def _groups_in_a_fresh_tmpdir(tmp_path: Path, tmp: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp)}
    first = AlertdProcess(tmp_path / "first", {}, env=env, serve_args=["--receivers", "1"]).start()
    killed = [p.name for p in tmp.iterdir()]
    assert killed == [f"alertd-group-{first.pid}-{killed[0].rsplit('-', 1)[1]}"], killed
    first.kill9()
    assert (tmp / killed[0] / "metrics").is_dir()  # left behind
    live = AlertdProcess(tmp_path / "live", {}, env=env, serve_args=["--receivers", "1"]).start()
    try:
        live_dir = {p.name for p in tmp.iterdir()} - set(killed)
        assert len(live_dir) == 1 and not (tmp / killed[0]).exists()
        third = AlertdProcess(tmp_path / "third", {}, env=env, serve_args=["--receivers", "1"]).start()
        try:
            assert live_dir < {p.name for p in tmp.iterdir()}  # the live group's directory is kept
        finally:
            third.terminate()
    finally:
        live.terminate()
    assert list(tmp.iterdir()) == []  # both removed their own at a graceful stop
