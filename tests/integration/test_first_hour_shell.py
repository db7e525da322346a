"""The first screens a new operator sees from a shell: `serve.sh` without pip's warning block, one notice
where notifications go (not one per process), and `alertd ... | head` without a traceback."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from testkit.alertd_proc import REPO, AlertdProcess

NOTICE = "no Slack token or PagerDuty keys configured"
# What setuptools' editable install prints through pip on every `pip install -e .` (setuptools 80).
WARNING_BLOCK = """  !!

          ********************************************************************************
          Please be careful with folders in your working directory with the same
          name as your package as they may take precedence during imports.
          ********************************************************************************

  !!"""


def test_serve_sh_keeps_pips_warning_block_off_the_first_screen(tmp_path):
    """serve.sh run against a stand-in .venv whose pip prints what setuptools prints on an editable install."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "serve.sh", tmp_path / "scripts" / "serve.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    block = json.dumps(WARNING_BLOCK)
    (bin_dir / "python").write_text(f"#!{sys.executable}\nimport sys\nprint({block}, file=sys.stderr)\n")
    (bin_dir / "alertd").write_text("#!/bin/sh\necho \"alertd listening on http://127.0.0.1:9095\"\n")
    for exe in bin_dir.iterdir():
        exe.chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "serve.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHON": sys.executable})
    screen = done.stdout + done.stderr
    assert done.returncode == 0, screen
    assert "Please be careful" not in screen and "!!" not in screen, screen
    assert "alertd listening" in screen
    assert "Please be careful" in (tmp_path / ".venv" / "install.log").read_text(), "kept in the log"


def test_a_failed_install_shows_pips_output(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "serve.sh", tmp_path / "scripts" / "serve.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("#!/bin/sh\necho 'ERROR: No matching distribution found for aiohttp' >&2\nexit 1\n")
    (bin_dir / "python").chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "serve.sh")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "No matching distribution found for aiohttp" in done.stderr and "installing alertd failed" in done.stderr


def test_one_notice_where_notifications_go_for_a_group_of_processes(tmp_path):
    """serve with a receiver process beside the engine (the default on 2+ cores) says it once."""
    alertd = AlertdProcess(tmp_path, {}, serve_args=["--receivers", "1"]).start()
    try:
        assert "started 1 receiver processes" in alertd.log_path.read_text(), alertd.log_tail()
    finally:
        alertd.stop()
    log = alertd.log_path.read_text()
    assert log.count(NOTICE) == 1, log


def test_explain_into_head_stops_quietly(tmp_path):
    """`alertd explain FILE | head`: the reader goes away after one line; no BrokenPipeError traceback."""
    webhook = json.loads((REPO / "examples" / "webhook-gpu-node.json").read_text())
    first = webhook["alerts"][0]
    webhook["alerts"] = [{**first, "fingerprint": f"{i:016x}", "labels": {**first["labels"], "gpu": str(i % 8),
                                                                            "Hostname": f"gpu-node-{i}"}}
                         for i in range(600)]  # far more than a pipe's 64 KiB buffer
    path = tmp_path / "big.json"
    path.write_text(json.dumps(webhook))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(f"{sys.executable} -m alertd.cli.main explain {path} | head -n 1", shell=True,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.count("\n") == 1, done.stdout
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
