"""The genuine PyTorchJob CRD of the Kubeflow training operator, from its Go module (the module proxy serves
the repository's zip; `go mod download` keeps it in the module cache), so tests create PyTorchJobs the API
server validates exactly as a cluster running the operator does."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testkit.process import ServiceUnavailable

MODULE = "github.com/kubeflow/training-operator@v1.8.1"
CRD = Path("manifests/base/crds/kubeflow.org_pytorchjobs.yaml")


def pytorchjob_crd() -> dict[str, Any]:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    with tempfile.TemporaryDirectory() as work:  # outside any module: `go mod download` needs none
        try:
            done = subprocess.run([go, "mod", "download", "-json", MODULE], capture_output=True, text=True,
                                  timeout=300, cwd=work)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServiceUnavailable(f"go mod download {MODULE}: {exc}") from None
    if done.returncode != 0:
        raise ServiceUnavailable(f"go mod download {MODULE} failed: {done.stderr or done.stdout}")
    crd: dict[str, Any] = yaml.safe_load((Path(json.loads(done.stdout)["Dir"]) / CRD).read_text())
    return crd
