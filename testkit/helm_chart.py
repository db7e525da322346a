"""The Helm chart (deploy/helm/alertd) rendered by the real helm (scripts/build-kube.sh), and the Prometheus
Operator's CRDs (scripts/fetch-prometheus-operator-crds.sh) for a test API server to check its monitoring
objects against."""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from testkit.kube_apiserver import CACHE_DIR, kube_bin
from testkit.process import INSTALL_COMMAND, ServiceUnavailable

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "alertd"
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


def kube_json(k: Any, namespace: str, *what: str) -> dict[str, Any]:
    """``kubectl -n NAMESPACE get WHAT -o json``, decoded; fails on kubectl's error."""
    done = k.kubectl("-n", namespace, "get", *what, "-o", "json")
    assert done.returncode == 0, (done.args, done.stderr)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def materialize(k: Any, namespace: str, pod: dict[str, Any], root: Path) -> dict[str, Path]:
    """Each volume mount of the pod's container as a directory under ``root`` holding what the API server
    has for its volume (a ConfigMap's or a Secret's files; an empty directory otherwise): the kubelet's part,
    for a test API server that has none."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    out: dict[str, Path] = {}
    for mount in pod["containers"][0]["volumeMounts"]:
        where = root / mount["mountPath"].lstrip("/")
        where.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            for name, text in (kube_json(k, namespace, "configmap", volume["configMap"]["name"]).get("data")
                               or {}).items():
                (where / name).write_text(text)
        elif "secret" in volume:
            for name, value in kube_json(k, namespace, "secret", volume["secret"]["secretName"])["data"].items():
                (where / name).write_bytes(base64.b64decode(value))
        out[mount["mountPath"]] = where
    return out


def remount(text: str, mounts: dict[str, Path]) -> str:
    """``text`` (a config) with every mount path in it pointing at its directory: one pass, longest first,
    so a replaced path is not read again (/tmp is a mount, and a test's root)."""
    pattern = "|".join(re.escape(p) for p in sorted(mounts, key=len, reverse=True))
    return re.sub(f"({pattern})(?=[/\\s\"']|$)", lambda m: str(mounts[m.group(1)]), text, flags=re.M)


def serve_example(doc: dict[str, Any], slack_url: str, pagerduty_url: str, workdir: Path,
                  webhook_token: str) -> Any:
    """The example values' config run by ``alertd serve`` with only what a cluster provides swapped for the
    test's (Slack's and PagerDuty's addresses; no in-cluster enrichment, no Alertmanagers), after it took the
    example webhook: its :class:`AlertdProcess`, for the caller to stop."""
    from testkit.alertd_proc import AlertdProcess

    doc["notify"]["slack"]["base_url"] = slack_url
    doc["notify"]["pagerduty"]["events_url"] = pagerduty_url
    doc.pop("enrich")  # in-cluster credentials: no pod here
    doc.pop("alertmanager")  # the example's in-cluster Alertmanagers: none here
    alertd = AlertdProcess(workdir, doc).start()
    webhook = CHART.parents[2] / "examples" / "webhook-gpu-node.json"
    status, answer, _ = alertd.post(webhook.read_bytes(), {"Authorization": f"Bearer {webhook_token}"})
    if status != 200:
        alertd.stop()
        raise AssertionError(f"the example webhook: {status} {answer!r}")
    return alertd
