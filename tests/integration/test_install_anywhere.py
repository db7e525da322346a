"""A non-editable ``pip install .`` serves from an empty directory, with no repository around it.

Before the shipped rules were package data, this install could not start ("rules: cannot read"), and the
compaction of stored incidents silently lost the catalog it compares with.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from testkit.fresh_install import InstallUnavailable, install
from testkit.process import free_port, http

REPO = Path(__file__).resolve().parents[2]
WEBHOOK = REPO / "examples" / "webhook-gpu-node.json"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    try:
        return install(tmp_path_factory.mktemp("install"))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


def _run(bindir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bindir / "alertd"), *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_the_installed_package_holds_the_rules_and_says_its_version(installed, tmp_path):
    version = _run(installed, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "alertd 0.1.0", version
    probe = subprocess.run(
        [str(installed / "python"), "-c",
         "import alertd, alertd.store.compact as c; from alertd.rules.shipped import shipped_rules;"
         "print(alertd.__file__); print(shipped_rules()); print(c._reference(79)['action'])"],
        capture_output=True, text=True, cwd=tmp_path, check=True).stdout.split("\n")
    assert str(installed.parent) in probe[0] and str(REPO) not in probe[0]
    assert (Path(probe[1]) / "xid-catalog.yml").is_file() and str(REPO) not in probe[1]
    assert probe[2] == "reboot_node"  # compaction reads the packaged catalog
    assert _run(installed, "test", cwd=tmp_path).returncode == 0  # the shipped rules' own tests are there too


def test_serve_from_an_empty_directory(installed, tmp_path):
    (tmp_path / "rules").mkdir()  # a stray rules/ folder is not picked up by itself
    (tmp_path / "rules" / "routing.yml").write_text("this: is not a rule file\n")
    port = free_port()
    (tmp_path / "alertd.yml").write_text(f"listen: 127.0.0.1:{port}\n")
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([str(installed / "alertd"), "serve", "--config", "alertd.yml"], cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while http("GET", base + "/readyz")[0] != 200:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        assert http("GET", base + "/healthz")[0] == 200
        health = subprocess.run([str(installed / "python"), "-m", "alertd.app.healthcheck", "--config", "alertd.yml"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert health.returncode == 0, health.stderr  # the image's HEALTHCHECK, on the config's listener
        status, _, body = http("POST", base + "/api/v1/alerts/alertmanager", WEBHOOK.read_bytes(),
                               {"Content-Type": "application/json"})
        assert status == 200 and json.loads(body)["alerts"] == 3
        metrics = http("GET", base + "/metrics")[2].decode()
        assert 'alertd_build_info{python="' in metrics and 'version="0.1.0"' in metrics
        while not (incidents := json.loads(http("GET", base + "/api/v1/incidents")[2] or b"{}").get("incidents")):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert incidents[0]["title"].startswith("Xid 79")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
