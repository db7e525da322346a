"""docs/deploy.md's Helm install, step by step, against a real kube-apiserver: the Secret with the two
keys the defaults need (no Slack, no PagerDuty), ``helm install`` with the chart's default values (the
objects are created, not a dry run), and the config the pod would read, taken back from the API server
with the Deployment's own arguments, run by ``alertd serve``: it starts, says once that notifications go
to the console, and takes the example webhook with the token from the Secret.

The test API server has no kubelet, so the pod's part is played here: each of the Deployment's volume
mounts is made a directory holding what the API server has for its volume (ConfigMap, Secret, empty
dir), and every mount path in the config and the arguments points there. The Kubernetes enrichment the
chart turns on (in-cluster credentials) reads the same API server through a kubeconfig."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.fixtures import kube_apiserver  # noqa: F401  (fixture)
from testkit.helm_chart import CHART, helm, kube_json, materialize, remount
from testkit.pipeline import wait
from testkit.process import ServiceUnavailable, free_port, http

pytestmark = pytest.mark.services

ROOT = CHART.parents[2]
NAMESPACE, RELEASE = "first-install", "first"  # their own names: other tests of the session use "alertd"
FULLNAME = f"{RELEASE}-alertd"
WEBHOOK_TOKEN, ADMIN_TOKEN = "w" * 64, "a" * 64
NOTICE = "no Slack token or PagerDuty keys configured"


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def installed(kube_apiserver, tmp_path_factory):  # noqa: F811
    """Steps 2 and 3 of docs/deploy.md: the namespace, the Secret, ``helm install`` with the defaults."""
    k = kube_apiserver
    kubeconfig = k.kubeconfig(tmp_path_factory.mktemp("helm") / "kubeconfig")
    ok(k.kubectl("create", "namespace", NAMESPACE))
    ok(k.kubectl("-n", NAMESPACE, "create", "secret", "generic", "alertd", f"--from-literal=webhook-token={WEBHOOK_TOKEN}",
                 f"--from-literal=api-admin={ADMIN_TOKEN}"))
    try:
        done = helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kubeconfig", str(kubeconfig))
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    ok(done)
    return k, kubeconfig


def get(k, *what: str) -> dict:
    return kube_json(k, NAMESPACE, *what)


def test_helm_install_creates_every_object(installed):
    k, _ = installed
    listed = get(k, "deployment,service,configmap,persistentvolumeclaim,serviceaccount,networkpolicy")["items"]
    names = {(o["kind"], o["metadata"]["name"]) for o in listed}
    assert {("Deployment", FULLNAME), ("Service", FULLNAME), ("ConfigMap", FULLNAME), ("ConfigMap", f"{FULLNAME}-rules"),
            ("PersistentVolumeClaim", f"{FULLNAME}-data"), ("ServiceAccount", FULLNAME),
            ("NetworkPolicy", FULLNAME)} <= names, names
    for kind in ("clusterrole", "clusterrolebinding"):
        ok(k.kubectl("get", kind, f"{FULLNAME}-enrichment"))
    deployment = get(k, "deployment", FULLNAME)
    assert deployment["metadata"]["generation"] >= 1 and "uid" in deployment["metadata"], "created, not a dry run"


def test_the_config_the_pod_reads_starts_alertd_serve(installed, tmp_path):
    k, kubeconfig = installed
    pod = get(k, "deployment", FULLNAME)["spec"]["template"]["spec"]
    mounts = materialize(k, NAMESPACE, pod, tmp_path / "pod")
    config = mounts["/etc/alertd/config"] / "alertd.yml"
    text = config.read_text()
    assert "notify" not in text, "the defaults configure no Slack and no PagerDuty"
    config.write_text(remount(text, mounts))
    args = [str(mounts["/etc/alertd/config"] / "alertd.yml") if a == "/etc/alertd/config/alertd.yml" else a
            for a in pod["containers"][0]["args"]]
    assert args[0] == "serve", args
    port = free_port()
    log = tmp_path / "alertd.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "alertd.cli.main", *args, "--listen", f"127.0.0.1:{port}"],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait("alertd ready", lambda: http("GET", url + "/readyz", timeout=2)[0] == 200 or proc.poll() is not None, 60,
             detail=log.read_text)
        assert proc.poll() is None, log.read_text()
        body = (ROOT / "examples" / "webhook-gpu-node.json").read_bytes()
        status, _, answer = http("POST", url + "/api/v1/alerts/alertmanager", body,
                                 {"Authorization": f"Bearer {WEBHOOK_TOKEN}", "Content-Type": "application/json"})
        assert status == 200, answer
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        found = wait("the incident", lambda: json.loads(http("GET", url + "/api/v1/incidents", None, admin)[2])["incidents"],
                     30, detail=log.read_text)
        assert found[0]["xids"] == [79], found
    finally:
        proc.terminate()
        proc.wait(30)
    lines = log.read_text()
    assert lines.count(NOTICE) == 1, lines
    assert "listening on" in lines, lines

