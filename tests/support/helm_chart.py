"""The Helm chart (deploy/helm/alertd) rendered by the real helm (scripts/build-kube.sh), and the Prometheus
Operator's CRDs (scripts/fetch-prometheus-operator-crds.sh) for a test API server to check its monitoring
objects against."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.kube_apiserver import CACHE_DIR, kube_bin
from tests.support.process import INSTALL_COMMAND, ServiceUnavailable

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "alertd"
PROM_OPERATOR_VERSION = os.environ.get("ALERTD_PROM_OPERATOR_VERSION") or "v0.85.0"


def helm_path() -> Path:
    return kube_bin("helm")


def helm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(kube_bin("helm")), *args], input=stdin, capture_output=True, text=True, timeout=120)


def render(values: dict[str, Any], *, release: str = "alertd", namespace: str = "monitoring",
           values_dir: Path | None = None) -> str:
    """``helm template`` with these values (a values file, as a user passes it); raises on a failed render."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    if values:
        assert values_dir is not None, "a directory for the values file"
        path = values_dir / f"values-{release}.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["--values", str(path)]
    done = helm(*args)
    if done.returncode:
        raise AssertionError(f"helm template failed: {done.stderr}")
    return done.stdout


def documents(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if d]


def operator_crds() -> list[Path]:
    crds = sorted((CACHE_DIR / f"prometheus-operator-{PROM_OPERATOR_VERSION}" / "crds").glob("*.yaml"))
    if not crds:
        raise ServiceUnavailable(f"the Prometheus Operator's CRDs are not downloaded; run: {INSTALL_COMMAND}")
    return crds
