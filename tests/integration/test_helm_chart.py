"""The Helm chart: ``helm lint``, ``helm template`` over a matrix of values, and every rendered object
accepted by a real kube-apiserver's server-side dry run (``helm install --dry-run=server`` and ``helm
template --validate`` accept invalid objects, so neither is used)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml

from tests.support.fixtures import kube_apiserver, missing_service  # noqa: F401  (fixture)
from testkit.helm_chart import CHART, documents, helm, helm_path, operator_crds, render
from testkit.process import ServiceUnavailable

ROOT = CHART.parents[2]
NAMESPACE = "monitoring"
POSTGRES = {"backend": "postgres", "postgres": {"dsn": "postgresql://alertd@postgres.db.svc:5432/alertd"}}
VALUE_SETS = {
    "sqlite": {},
    "postgres-1": {"storage": POSTGRES | {"postgres": POSTGRES["postgres"] | {"replicas": 1}}},
    "postgres-3": {"storage": POSTGRES | {"postgres": POSTGRES["postgres"] | {"passwordKey": "postgres-password"}},
                   "ingress": {"enabled": True, "className": "nginx", "host": "alertd.example.com",
                               "tlsSecretName": "alertd-tls"}},
    "postgres-5": {"storage": POSTGRES | {"postgres": POSTGRES["postgres"] | {"replicas": 5}},
                   "networkPolicy": {"from": [{"namespaceSelector": {"matchLabels": {
                       "kubernetes.io/metadata.name": "monitoring"}}}]}},
    "remediation": {"remediation": {"enabled": True}},
    "monitoring": {"monitoring": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}},
                                  "prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
                   "routing": {"receivers": [{"name": "gpu-oncall", "slack": "#gpu-oncall"}]},
                   "rules": {"site-xids.yml": "# the site's own catalog entries go here\n"}},
    "kubernetes-example": yaml.safe_load((ROOT / "deploy" / "kubernetes" / "values.yaml").read_text()),
    "values-example": yaml.safe_load((CHART / "values-example.yaml").read_text()),
}


@pytest.fixture(scope="module")
def cluster(kube_apiserver):  # noqa: F811
    """The test API server with the release's namespace and the Prometheus Operator's CRDs."""
    try:
        crds = operator_crds()
    except ServiceUnavailable as exc:
        missing_service(str(exc))
    kube_apiserver.kubectl("create", "namespace", NAMESPACE)
    for crd in crds:
        done = kube_apiserver.kubectl("apply", "--server-side", "-f", str(crd))
        assert done.returncode == 0, done.stderr
    # kubectl wait gives up at once ("accessor error: <nil>") while a new CRD has no status.conditions yet
    deadline = time.monotonic() + 60
    while (done := kube_apiserver.kubectl("wait", "--for", "condition=established", "--timeout=60s",
                                          "crd/servicemonitors.monitoring.coreos.com",
                                          "crd/prometheusrules.monitoring.coreos.com")).returncode != 0:
        assert "accessor error" in done.stderr and time.monotonic() < deadline, done.stderr
        time.sleep(0.2)
    return kube_apiserver


def dry_run(server, manifest: str):
    return server.kubectl("apply", "--dry-run=server", "--namespace", NAMESPACE, "-f", "-", stdin=manifest)


def test_helm_lint_passes_for_every_value_set(tmp_path):
    for name, values in VALUE_SETS.items():
        args = ["lint", str(CHART), "--strict"]
        if values:
            render(values, release=name, values_dir=tmp_path)  # writes the values file
            args += ["--values", str(tmp_path / f"values-{name}.yaml")]
        done = helm(*args)
        assert done.returncode == 0, (name, done.stdout, done.stderr)


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_every_rendered_object_is_accepted_by_the_api_server(cluster, tmp_path, name):
    rendered = render(VALUE_SETS[name], release=name, values_dir=tmp_path)
    kinds = {d["kind"] for d in documents(rendered)}
    done = dry_run(cluster, rendered)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(documents(rendered)), done.stdout
    if name == "monitoring":
        assert {"ServiceMonitor", "PrometheusRule"} <= kinds
    if name.startswith("postgres"):
        assert "PersistentVolumeClaim" not in kinds


def test_the_dry_run_refuses_an_invalid_object(cluster, tmp_path):
    """The check can fail: a Deployment with a negative replica count and a PrometheusRule without
    its groups are refused by the server (kubectl's client-side parsing accepts both)."""
    docs = documents(render(VALUE_SETS["monitoring"], release="broken", values_dir=tmp_path))
    for doc in docs:
        if doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = -1
        if doc["kind"] == "PrometheusRule":
            doc["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    done = dry_run(cluster, yaml.safe_dump_all(docs))
    assert done.returncode != 0
    assert "replicas" in done.stderr and "for" in done.stderr, done.stderr


def test_the_prometheus_rule_ships_the_rule_files_as_they_are(tmp_path):
    """The PrometheusRule is deploy/prometheus's gpu-alerts.yml, gpu-job-alerts.yml and alertd-alerts.yml,
    group for group and rule for rule: a change to one of the files is the chart's change too."""
    shipped = ROOT / "deploy" / "prometheus"

    def groups(*names: str) -> list:
        return [g for name in names for g in yaml.safe_load((shipped / name).read_text())["groups"]]

    def rendered(job_rules: bool) -> list:
        values = VALUE_SETS["monitoring"] | {"monitoring": {"prometheusRule": {"enabled": True, "jobRules": job_rules}}}
        docs = documents(render(values, release=f"rules-{str(job_rules).lower()}", values_dir=tmp_path))
        return next(d for d in docs if d["kind"] == "PrometheusRule")["spec"]["groups"]

    assert rendered(True) == groups("gpu-alerts.yml", "gpu-job-alerts.yml", "alertd-alerts.yml")
    assert rendered(False) == groups("gpu-alerts.yml", "alertd-alerts.yml")


def test_postgres_replicas_share_one_store_and_sqlite_keeps_one_writer(tmp_path):
    sqlite = {d["kind"]: d for d in documents(render({}, release="one", values_dir=tmp_path))}
    assert sqlite["Deployment"]["spec"]["replicas"] == 1
    assert sqlite["Deployment"]["spec"]["strategy"]["type"] == "Recreate"
    assert "PodDisruptionBudget" not in sqlite  # a single pod: a budget would block every drain
    pg = {d["kind"]: d for d in documents(render(VALUE_SETS["postgres-5"], release="five", values_dir=tmp_path))}
    assert pg["Deployment"]["spec"]["replicas"] == 5 and pg["PodDisruptionBudget"]["spec"]["minAvailable"] == 4


def test_rules_are_a_directory_mount_and_secrets_are_files(tmp_path):
    docs = documents(render(VALUE_SETS["monitoring"], release="dirs", values_dir=tmp_path))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert not container.get("env") and not container.get("envFrom"), "no secret in the environment"
    assert all("subPath" not in m for m in container["volumeMounts"]), "a subPath mount never updates"
    rules = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-rules"))
    assert set(rules["data"]) == {"routing.yml", "site-xids.yml"}


def test_remediation_adds_only_what_it_needs(tmp_path):
    off = documents(render({}, release="off", values_dir=tmp_path))
    on = documents(render(VALUE_SETS["remediation"], release="on", values_dir=tmp_path))
    verbs = lambda docs: {(g, r, v) for d in docs if d["kind"] == "ClusterRole" for rule in d["rules"]  # noqa: E731
                          for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert all(v in {"get", "list", "watch"} for _, _, v in verbs(off))
    assert verbs(on) - verbs(off) == {("", "nodes", "patch"), ("", "pods/eviction", "create"),
                                      ("policy", "poddisruptionbudgets", "list")}


def test_deploy_kubernetes_is_the_chart_rendered(tmp_path):
    """deploy/kubernetes/*.yaml (for kubectl apply without helm) are generated: never out of step."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "render-kubernetes.sh")], capture_output=True, text=True,
                          env={**os.environ, "OUT": str(tmp_path), "HELM": str(helm_path())}, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in ("alertd.yaml", "rbac.yaml"):
        assert (tmp_path / name).read_text() == (ROOT / "deploy" / "kubernetes" / name).read_text(), \
            f"deploy/kubernetes/{name} differs from the chart: run scripts/render-kubernetes.sh"
