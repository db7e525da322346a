"""The link a Slack message carries opens its incident's page, with the chart's example values
(deploy/helm/alertd/values-example.yaml) installed in a real kube-apiserver by docs/deploy.md's own commands
(steps 2 and 3, run by bash as written): the signed "Incident" link, taken
from the message the Slack test server received, is followed the way the cluster would carry it, with no
token.

Each hop is read back from the API server, not assumed: the Ingress rule for the link's host and a path that
prefixes the link's (its TLS covering the host for an https link), the Service and port it names, the
container port that Service port targets, and the NetworkPolicy over the Deployment's pods, which must let
the ingress controller's namespace in on that port (the selector evaluated by the API server against the
namespace's own labels). The test API server has no kubelet and no ingress controller: the pod's config,
from the ConfigMap and the Secret the release mounts, runs as ``alertd serve`` on a loopback port standing
for the container port, and the request carries the Ingress host in its Host header, as a controller
forwards it.
"""
from __future__ import annotations

import base64
import html
import json
import re
import secrets
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from testkit.container import documented_steps
from tests.support.fixtures import kube_apiserver  # noqa: F401  (fixture)
from testkit.kube_apiserver import kube_bin
from testkit.helm_chart import CHART, kube_json, materialize, remount, serve_example
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import wait
from testkit.process import ServiceUnavailable, http
from testkit.slack_server import SlackTestServer

pytestmark = pytest.mark.services

ROOT = CHART.parents[2]
NAMESPACE, RELEASE = "example-site", "alertd"  # its own namespace: other tests of the session install too
VALUES = yaml.safe_load((CHART / "values-example.yaml").read_text())
INCIDENT_LINK = re.compile(r"<(https?://[^|>]+)\|Incident>")


def ok(done) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return str(done.stdout)


def documented_install(kubeconfig: Path, workdir: Path) -> list[str]:
    """docs/deploy.md's Helm steps 2 and 3 with the example values, each command through bash in ``workdir``
    as written, ``kubectl`` and ``helm`` on the test API server; only the namespace is the test's, and the
    Secret's placeholders (``xoxb-...``, ``...``) are given values. The commands run, as run."""
    steps = documented_steps("## Kubernetes: the Helm chart", until="**4. Check that it works.**")
    (workdir / "deploy").symlink_to(ROOT / "deploy")  # the page runs from the repository's top
    tools = (f'kubectl() {{ {kube_bin("kubectl")} --kubeconfig {kubeconfig} "$@"; }}\n'
             f'helm() {{ {kube_bin("helm")} --kubeconfig {kubeconfig} "$@"; }}\nset -eo pipefail\n')
    ran = []
    for step in steps:
        if step.line.startswith("docker "):  # step 1: the image; no kubelet here pulls it
            continue
        line = re.sub(r"(-n|--namespace|namespace) monitoring\b", rf"\1 {NAMESPACE}", step.line)
        line = line.replace("=xoxb-...", f"=xoxb-{secrets.token_hex(8)}")
        line = re.sub(r"=\.\.\.(?=\s|$)", f"={PagerDutyTestServer.ROUTING_KEY}", line)
        done = subprocess.run(["bash", "-c", tools + line], cwd=workdir, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"docs/deploy.md: {step.line}\nran: {line}\n{done.stdout}{done.stderr}"
        ran.append(line)
    return ran


@pytest.fixture(scope="module")
def installed(kube_apiserver, tmp_path_factory):  # noqa: F811
    """docs/deploy.md's steps 2 and 3 with the example values: the Secret, ``helm install -f``; the Secret's
    keys as the API server has them."""
    k = kube_apiserver
    workdir = tmp_path_factory.mktemp("helm-links")
    kubeconfig = k.kubeconfig(workdir / "kubeconfig")
    ok(k.kubectl("create", "namespace", VALUES["ingress"]["controllerNamespace"]))  # the controller's, a site's own
    try:
        kube_bin("helm")
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    ran = documented_install(kubeconfig, workdir)
    assert any(line.startswith("helm install ") and "-f my-values.yaml" in line for line in ran), ran
    data = kube_json(k, NAMESPACE, "secret", "alertd")["data"]
    return k, {key: base64.b64decode(value).decode() for key, value in data.items()}


def ingress_route(k, url: str) -> tuple[str, int]:
    """Where the Ingress sends ``url``: (host, container port), each hop as the API server has it."""
    parts = urlsplit(url)
    ingress = kube_json(k, NAMESPACE, "ingress", RELEASE)["spec"]
    rule = next((r for r in ingress["rules"] if r.get("host") == parts.hostname), None)
    assert rule is not None, f"no Ingress rule for {parts.hostname}: {ingress['rules']}"
    if parts.scheme == "https":
        assert any(parts.hostname in t.get("hosts", []) for t in ingress.get("tls", [])), ingress.get("tls")
    path = next((p for p in rule["http"]["paths"] if p["pathType"] == "Prefix"
                 and (parts.path + "/").startswith(p["path"].rstrip("/") + "/")), None)
    assert path is not None, f"no Ingress path for {parts.path}: {rule['http']['paths']}"
    backend = path["backend"]["service"]
    service = kube_json(k, NAMESPACE, "service", backend["name"])["spec"]
    port = next(p for p in service["ports"] if p.get("name") == backend["port"].get("name")
                or p["port"] == backend["port"].get("number"))
    pod = kube_json(k, NAMESPACE, "deployment", RELEASE)["spec"]["template"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items(), "the Service selects the pods"
    target = next(p for p in pod["spec"]["containers"][0]["ports"]
                  if port["targetPort"] in (p.get("name"), p["containerPort"]))
    return str(parts.hostname), int(target["containerPort"])


def admitted(k, namespace: str, container_port: int) -> bool:
    """Whether the NetworkPolicy over alertd's pods lets ``namespace``'s pods reach ``container_port``:
    a rule naming the port (by name or number) with a peer whose namespaceSelector the API server matches
    to ``namespace``'s labels."""
    policy = kube_json(k, NAMESPACE, "networkpolicy", RELEASE)["spec"]
    pod = kube_json(k, NAMESPACE, "deployment", RELEASE)["spec"]["template"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    names = {p.get("name") for p in pod["spec"]["containers"][0]["ports"] if p["containerPort"] == container_port}
    for rule in policy["ingress"]:
        if not any(p.get("port") in names | {container_port} for p in rule.get("ports", [])):
            continue
        if "from" not in rule:
            return True
        for peer in rule["from"]:
            if set(peer) != {"namespaceSelector"}:
                continue
            selector = ",".join(f"{key}={value}" for key, value in peer["namespaceSelector"]["matchLabels"].items())
            found = json.loads(ok(k.kubectl("get", "namespaces", "-l", selector, "-o", "json")))["items"]
            if namespace in {n["metadata"]["name"] for n in found}:
                return True
    return False


def pod_config(k, tmp: Path) -> dict:
    """The config the release's pod reads, its mounts made local directories."""
    pod = kube_json(k, NAMESPACE, "deployment", RELEASE)["spec"]["template"]["spec"]
    mounts = materialize(k, NAMESPACE, pod, tmp / "pod")
    doc: dict = yaml.safe_load(remount((mounts["/etc/alertd/config"] / "alertd.yml").read_text(), mounts))
    return doc


def test_the_slack_link_opens_the_incident_through_the_ingress_without_a_token(installed, tmp_path):
    k, keys = installed
    doc = pod_config(k, tmp_path)
    assert doc["external_url"] == VALUES["externalURL"] and "links" in doc["notify"]["slack"], doc
    slack, pagerduty = SlackTestServer(token=keys[VALUES["notify"]["slack"]["tokenKey"]]), PagerDutyTestServer()
    with serving_in_thread(slack, pagerduty):
        alertd = serve_example(doc, slack.url, pagerduty.url, tmp_path / "alertd", keys["webhook-token"])
        try:
            def link() -> str:
                for call in slack.calls_of("chat.postMessage"):
                    if found := INCIDENT_LINK.search(json.dumps(call.params.get("blocks", ""))):
                        return html.unescape(found.group(1))
                return ""

            url = wait("the Slack message's Incident link", link)
            host, container_port = ingress_route(k, url)
            assert doc["listen"].rpartition(":")[2] == str(container_port), "the pod listens where the Service sends"
            controller = VALUES["ingress"]["controllerNamespace"]
            assert admitted(k, controller, container_port), f"the NetworkPolicy keeps {controller} out"
            assert not admitted(k, "default", container_port), "the NetworkPolicy admits everyone"

            parts = urlsplit(url)
            status, _, page = http("GET", f"{alertd.url}{parts.path}?{parts.query}", headers={"Host": host})
            incident_id = parts.path.rpartition("/")[2]
            assert status == 200 and f"<h1>{incident_id}:".encode() in page and b"Xid 79" in page, (status, page[:500])
            status, _, page = http("GET", f"{alertd.url}{parts.path}", headers={"Host": host})
            assert f"<h1>{incident_id}:".encode() not in page, "without the signature the page asks for a sign-in"
        finally:
            alertd.stop()
