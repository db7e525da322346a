"""``alertd serve`` as a real process: refusal to serve an open API on a public address, and secrets
read from files (used, and never written to the log, even at debug level)."""
from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time

from testkit.alertd_proc import REPO, AlertdProcess
from testkit.big_bodies import measure
from testkit.notify_harness import hook, rules_dir, top_messages, xid_alert, ROUTING
from testkit.process import free_port, http
from testkit.slack_server import SlackTestServer


def serve(*args: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "alertd.cli.main", "serve", "--data-dir", str(cwd / "data"), *args],
                            cwd=cwd, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_public_listener_without_api_auth_is_refused_in_one_line(tmp_path):
    proc = serve("--listen", f"0.0.0.0:{free_port()}", cwd=tmp_path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.count("\n") == 1 and "refusing to listen on 0.0.0.0 without API authentication" in err, err
    assert "--insecure-no-auth" in err and "Traceback" not in err + out


def test_insecure_no_auth_is_an_explicit_choice(tmp_path):
    port = free_port()
    proc = serve("--listen", f"0.0.0.0:{port}", "--insecure-no-auth", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while http("GET", f"http://127.0.0.1:{port}/readyz", timeout=2)[0] != 200:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


async def test_secrets_from_files_are_used_and_never_logged(tmp_path):
    secrets = {
        "slack-token": "xoxb-from-a-file-7d1e",
        "slack-signing": "signing-secret-from-file-0c9a3f",
        "api-token": "api-token-from-file-5b7e2c1d",
        "hook-token": "hook-token-from-file-9e4f0a",
        "pd-key": "R0UT1NGKEYFROMF1LE00000000000000",
    }
    for name, value in secrets.items():
        (tmp_path / name).write_text(value + "\n")  # `echo > file` style: the newline is not part of it
    slack = SlackTestServer(token=secrets["slack-token"], signing_secret=secrets["slack-signing"])
    await slack.start()
    proc = AlertdProcess(tmp_path / "alertd", {
        "log": {"level": "debug"},
        "rules": {"paths": [str(rules_dir(tmp_path, ROUTING))]},
        "receiver": {"auth": {"bearer_token_file": str(tmp_path / "hook-token")}},
        "api": {"auth": {"tokens": [{"name": "ops", "role": "act", "token_file": str(tmp_path / "api-token")}]}},
        "notify": {"slack": {"token_file": str(tmp_path / "slack-token"), "base_url": slack.base_url,
                             "signing_secret_file": str(tmp_path / "slack-signing"), "debounce": "0s"},
                   "pagerduty": {"events_url": "http://127.0.0.1:9/never", "routing_keys_files": {
                       "infra": str(tmp_path / "pd-key")}}},
    })
    try:
        await asyncio.to_thread(proc.start)
        doc = hook(xid_alert("n1", 3))
        status, _, _ = await asyncio.to_thread(proc.post, doc, {"Authorization": "Bearer wrong-token-000000"})
        assert status == 401
        status, _, _ = await asyncio.to_thread(proc.post, doc, {"Authorization": f"Bearer {secrets['hook-token']}"})
        assert status == 200
        for _ in range(200):  # the Slack test server accepts only the token from the file
            if top_messages(slack, "#gpu-oncall"):
                break
            await asyncio.sleep(0.05)
        assert top_messages(slack, "#gpu-oncall")
        status, body = await asyncio.to_thread(proc.get_json, "/api/v1/incidents",
                                               {"Authorization": f"Bearer {secrets['api-token']}"})
        assert status == 200 and len(body["incidents"]) == 1
    finally:
        await asyncio.to_thread(proc.stop)
        await slack.stop()
    log = proc.log_path.read_text()
    assert "DEBUG" in log  # the debug level was on
    for name, value in secrets.items():
        assert value not in log, f"{name} is in the log"


def test_a_public_listener_with_only_the_api_locked_is_refused(tmp_path):
    """An open receiver on 0.0.0.0 lets anyone on the network open and resolve alert state."""
    config = tmp_path / "alertd.yml"
    config.write_text("api:\n  auth:\n    tokens: [{name: ops, role: admin, token: api-token-0123456789abc}]\n")
    proc = serve("--config", str(config), "--listen", f"0.0.0.0:{free_port()}", cwd=tmp_path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.count("\n") == 1, err
    assert "without receiver authentication" in err and "API authentication" not in err, err
    assert "receiver.auth.bearer_token_file" in err and "Traceback" not in err + out


def test_data_dir_and_database_files_are_private(tmp_path):
    proc = AlertdProcess(tmp_path / "alertd", {}, serve_args=["--receivers", "0"])
    old = os.umask(0o022)  # the usual default, under which files are world-readable unless created otherwise
    try:
        proc.start()
        assert proc.post(hook(xid_alert("n1", 3)))[0] == 200
    finally:
        os.umask(old)
        proc.stop()
    assert stat.S_IMODE(proc.data_dir.stat().st_mode) == 0o700
    files = [p for p in proc.data_dir.iterdir() if p.name.startswith("alertd.sqlite3")]
    assert {p.name for p in files} >= {"alertd.sqlite3", "alertd.sqlite3-inbox"}, files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path, oct(path.stat().st_mode))


def test_post_reload_rereads_the_credentials_of_a_single_process_server(tmp_path):
    admin, old, new = "adm-0f1e2d3c4b5a69788796", "old-token-5b7e2c1d0a9f8e", "new-token-6c8f3d2e1b0a9f"
    token_file = tmp_path / "oncall.token"
    token_file.write_text(old + "\n")
    proc = AlertdProcess(tmp_path / "alertd", {"api": {"auth": {"tokens": [
        {"name": "boss", "role": "admin", "token": admin},
        {"name": "oncall", "role": "act", "token_file": str(token_file)}]}}}, serve_args=["--receivers", "0"])
    try:
        proc.start()
        assert proc.get_json("/api/v1/incidents", {"Authorization": f"Bearer {old}"})[0] == 200
        token_file.write_text(new + "\n")
        status, _, body = http("POST", proc.url + "/-/reload", b"", {"Authorization": f"Bearer {admin}"})
        assert status == 200, body
        assert proc.get_json("/api/v1/incidents", {"Authorization": f"Bearer {new}"})[0] == 200
        assert proc.get_json("/api/v1/incidents", {"Authorization": f"Bearer {old}"})[0] == 401
    finally:
        proc.stop()


def test_thirty_large_bodies_to_the_login_are_refused_without_being_buffered(tmp_path):
    """Before the limits this took 686 MB; `python -m bench.body_limits` prints the numbers (a few MB now)."""
    proc = AlertdProcess(tmp_path / "alertd", {}, serve_args=["--receivers", "0"])
    try:
        proc.start()
        for chunked in (False, True):
            got = asyncio.run(measure(proc, 30, 10 * 1024 * 1024, chunked))
            assert got["answered_413"] == 30, got
            assert got["peak_kb"] - got["before_kb"] < 64 * 1024, got  # 30 x 10 MiB buffered would be 300+ MB
    finally:
        proc.stop()
