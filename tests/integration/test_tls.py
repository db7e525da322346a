"""HTTPS on the listener: a real Alertmanager delivers its webhook over TLS (its tls_config trusting our CA),
a TLS client sees the certificate, SIGHUP swaps the certificate for new connections, plain HTTP is refused."""
from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from testkit.alertd_proc import REPO
from testkit.process import free_port
from testkit.services import start_alertmanager
from testkit.webhooks import UniqueWebhooks, dumps

API_TOKEN = "tls-admin-token-0b7c5e1a9d"
HOOK_TOKEN = "tls-hook-token-6f2a8d4c3e"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> None:
    """A CA and two server certificates for 127.0.0.1 (serials 1 and 2)."""
    d.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=alertd test CA", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for serial in (1, 2):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"server{serial}.key", "-out", f"server{serial}.csr",
                "-subj", f"/CN=alertd {serial}", cwd=d)
        openssl("x509", "-req", "-in", f"server{serial}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial",
                str(serial), "-out", f"server{serial}.crt", "-days", "2", "-extfile", "san.cnf", cwd=d)
    for p in d.iterdir():
        p.chmod(0o644)  # Alertmanager may run as another user
    d.chmod(0o755)


def client_ctx(pki: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki / "ca.crt"))


def served_serial(port: int, pki: Path) -> int:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with client_ctx(pki).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    done = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                          capture_output=True, check=True)
    return int(done.stdout.decode().strip().split("=")[1], 16)


def call(url: str, pki: Path, data: bytes | None = None, token: str = API_TOKEN) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers={"Authorization": f"Bearer {token}",
                                                         "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=client_ctx(pki)) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.services
def test_https_listener_with_alertmanager_and_certificate_reload(tmp_path):
    pki = tmp_path / "pki"
    make_pki(pki)
    (pki / "tls.crt").write_bytes((pki / "server1.crt").read_bytes())
    (pki / "tls.key").write_bytes((pki / "server1.key").read_bytes())
    port = free_port()
    config = tmp_path / "alertd.yml"
    config.write_text(yaml.safe_dump({
        "listen": f"127.0.0.1:{port}",
        "tls": {"cert_file": "pki/tls.crt", "key_file": "pki/tls.key"},  # relative to the config file
        "api": {"auth": {"tokens": [{"name": "tls-admin", "role": "admin", "token": API_TOKEN}]}},
        "receiver": {"auth": {"bearer_token": HOOK_TOKEN}},
    }))
    log = open(tmp_path / "alertd.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "alertd.cli.main", "serve", "--config", str(config),
                             "--data-dir", str(tmp_path / "data")], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                            env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]})
    am = None
    base = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if call(base + "/readyz", pki)[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "alertd.log").read_text()
            time.sleep(0.1)
        assert served_serial(port, pki) == 1
        try:  # plain HTTP on the TLS port gets no HTTP answer
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
            raise AssertionError("plain HTTP was answered")
        except (urllib.error.URLError, ConnectionError, OSError):
            pass

        # A real Alertmanager, its webhook_config trusting our CA through http_config.tls_config.
        am_config = tmp_path / "alertmanager.yml"
        am_config.write_text(yaml.safe_dump({
            "route": {"receiver": "alertd", "group_by": ["node"], "group_wait": "0s", "group_interval": "1s"},
            "receivers": [{"name": "alertd", "webhook_configs": [{
                "url": base + "/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": 0,
                "http_config": {"authorization": {"credentials": HOOK_TOKEN},
                                "tls_config": {"ca_file": str(pki / "ca.crt")}}}]}],
        }))
        am = start_alertmanager(am_config, tmp_path / "am")
        alert = UniqueWebhooks(run="tls", distinct_nodes=True).next()["alerts"][0]
        body = dumps([{k: alert[k] for k in ("labels", "annotations", "startsAt", "generatorURL")}])
        req = urllib.request.Request(am.url + "/api/v2/alerts", data=body, headers={"Content-Type": "application/json"})
        assert urllib.request.urlopen(req, timeout=10).status == 200
        deadline = time.monotonic() + 30
        while True:
            status, raw = call(base + "/api/v1/incidents", pki)
            if status == 200 and json.loads(raw)["incidents"]:
                break
            assert time.monotonic() < deadline, (tmp_path / "alertd.log").read_text()[-3000:]
            time.sleep(0.3)
        assert json.loads(raw)["incidents"][0]["node"] == alert["labels"]["node"]

        # Rotation: new files, SIGHUP, new connections see the new certificate.
        (pki / "tls.crt").write_bytes((pki / "server2.crt").read_bytes())
        (pki / "tls.key").write_bytes((pki / "server2.key").read_bytes())
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while served_serial(port, pki) != 2:
            assert time.monotonic() < deadline, "certificate not reloaded"
            time.sleep(0.1)
        assert call(base + "/readyz", pki)[0] == 200
        # A broken certificate on reload is refused and the running one stays.
        (pki / "tls.crt").write_text("not a certificate")
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert served_serial(port, pki) == 2 and proc.poll() is None
        assert "keeping the running certificate" in (tmp_path / "alertd.log").read_text()
    finally:
        if am is not None:
            am.stop()
        proc.terminate()
        proc.wait(30)
        log.close()


def test_unusable_certificate_is_one_line_at_start(tmp_path):
    (tmp_path / "alertd.yml").write_text(yaml.safe_dump({"tls": {"cert_file": "missing.crt", "key_file": "x.key"}}))
    done = subprocess.run([sys.executable, "-m", "alertd.cli.main", "serve", "--config", str(tmp_path / "alertd.yml"),
                           "--data-dir", str(tmp_path / "data")], cwd=tmp_path, env={"PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot use TLS certificate {tmp_path / 'missing.crt'}" in done.stderr
