"""A real Kubernetes API server for the tests: etcd (Debian's etcd-server) and kube-apiserver (built by
scripts/build-kube.sh from the Go module proxy), with RBAC and static bearer tokens, on loopback.

No kubelet: nodes and pods are plain API objects (pods stay Pending unless a test patches their status as
the kubelet would). The ServiceAccount admission plugin is off, so pods need no ``default`` account.
kube-controller-manager runs with only the namespace, disruption and podgc controllers: the disruption
controller computes PodDisruptionBudget status, without which every eviction a PDB covers answers 429.

``start_kube_apiserver(workdir)`` returns a :class:`KubeAPIServer`: ``url`` (https, self-signed),
``ca_file``, ``admin_token`` (system:masters) and ``token(name)`` for users with no rights until a test
binds a Role to them (``apply_rbac``), which is how the shipped RBAC is proven minimal.
"""
from __future__ import annotations

import json
import os
import secrets
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.process import (INSTALL_COMMAND, RunningService, ServiceStartError, ServiceUnavailable,
                                   find_binary, free_ports, retry_port_clash, runtime_dir, spawn, wait_ready)

CACHE_DIR = Path(os.environ.get("ALERTD_CACHE") or Path.home() / ".cache" / "alertd-test")
KUBE_VERSION = os.environ.get("ALERTD_KUBE_VERSION") or "v1.34.4"
USERS = ("alertd", "nobody", "remediator")  # static-token users with no rights of their own

REPO = Path(__file__).resolve().parents[1]


def kube_bin(name: str) -> Path:
    path = CACHE_DIR / f"kube-{KUBE_VERSION}" / "bin" / name
    if not path.exists():
        raise ServiceUnavailable(f"{path} not built; run: {INSTALL_COMMAND}")
    return path


@dataclass
class KubeAPIServer:
    etcd: RunningService
    apiserver: RunningService
    url: str
    ca_file: Path
    admin_token: str
    tokens: dict[str, str] = field(default_factory=dict)
    controllers: RunningService | None = None

    def token(self, user: str) -> str:
        return self.tokens[user]

    def kubeconfig(self, path: Path, user: str = "") -> Path:
        """A kubeconfig for ``user`` (a static-token user), or the admin when empty."""
        token = self.tokens[user] if user else self.admin_token
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user or "admin", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user or "admin"}}]}))
        return path

    def restart_apiserver(self, timeout: float = 90.0) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd (watches are cut; its watch cache
        starts over, so a watch resumed from an older resourceVersion may get 410 Gone)."""
        old = self.apiserver
        old.stop()
        self.apiserver = spawn("kube-apiserver", list(old.proc.args), port=old.port, log_path=old.log_path,
                               cwd=self.ca_file.parent.parent)
        wait_ready(self.apiserver, lambda: _get(self.url + "/readyz", self.admin_token, self.ca_file) == 200, timeout)

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
        self.apiserver.stop()
        self.etcd.stop()

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """One API call (as the admin unless ``token``); the status and the decoded JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {token or self.admin_token}", "Content-Type": content_type,
            "Accept": "application/json"})
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def create(self, path: str, body: Any) -> Any:
        status, answer = self.request("POST", path, body)
        if status not in (200, 201):
            raise AssertionError(f"POST {path}: {status} {answer}")
        return answer

    def kubectl(self, *args: str, stdin: str | None = None, token: str | None = None) -> subprocess.CompletedProcess:
        """kubectl against this server (the built one), as the admin unless ``token``."""
        cmd = [str(kube_bin("kubectl")), f"--server={self.url}", f"--certificate-authority={self.ca_file}",
               f"--token={token or self.admin_token}", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)


def bind_shipped_enrichment_role(k: KubeAPIServer, user: str = "alertd") -> None:
    """deploy/kubernetes/rbac.yaml's read-only role, as shipped, bound to a static-token user. The session's
    server is shared by several modules: the role and binding another one created already are fine (409)."""
    import yaml

    shipped = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "rbac.yaml").read_text()) if d]
    role = next(d for d in shipped if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "alertd-enrichment")
    for path, body in (("clusterroles", role), ("clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{user}-test-user"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "alertd-enrichment"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})):
        status, answer = k.request("POST", f"/apis/rbac.authorization.k8s.io/v1/{path}", body)
        assert status in (200, 201, 409), answer


def start_kube_apiserver(workdir: Path, timeout: float = 90.0) -> KubeAPIServer:
    apiserver_bin = kube_bin("kube-apiserver")
    etcd_bin = find_binary("etcd")

    def start() -> KubeAPIServer:
        run, log, cleanups = runtime_dir("kube", Path(workdir), None)
        client, peer, secure = free_ports(3)
        etcd = spawn("etcd", [etcd_bin, "--data-dir", run / "etcd", "--name", "alertd-test",
                              "--listen-client-urls", f"http://127.0.0.1:{client}",
                              "--advertise-client-urls", f"http://127.0.0.1:{client}",
                              "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                              "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                              "--initial-cluster", f"alertd-test=http://127.0.0.1:{peer}"],
                     port=client, log_path=log.with_name(log.stem + "-etcd.log"), cwd=run, cleanups=cleanups,
                     env={**os.environ, "ETCD_UNSUPPORTED_ARCH": "amd64"})
        wait_ready(etcd, lambda: _get(f"http://127.0.0.1:{client}/health") == 200, 30)
        admin = secrets.token_hex(16)
        tokens = {user: secrets.token_hex(16) for user in USERS}
        (run / "tokens.csv").write_text(f'{admin},admin,admin,"system:masters"\n'
                                        + "".join(f"{t},{u},{u}\n" for u, t in tokens.items()))
        key = run / "sa.key"
        made = subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], capture_output=True, text=True)
        if made.returncode != 0:
            etcd.stop()
            raise ServiceStartError(f"openssl genrsa failed: {made.stderr}")
        certs = run / "certs"
        api = spawn("kube-apiserver", [
            apiserver_bin, f"--etcd-servers=http://127.0.0.1:{client}", f"--secure-port={secure}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--cert-dir={certs}",
            f"--token-auth-file={run / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/24", f"--service-account-key-file={key}",
            f"--service-account-signing-key-file={key}", "--service-account-issuer=https://alertd-test.invalid",
            "--disable-admission-plugins=ServiceAccount", "--enable-priority-and-fairness=false",
            "--allow-privileged=false", "--profiling=false", "--watch-cache=true"],
            port=secure, log_path=log, cwd=run)
        url = f"https://127.0.0.1:{secure}"
        ca = certs / "apiserver.crt"
        wait_ready(api, lambda: ca.exists() and _get(url + "/readyz", admin, ca) == 200, timeout)
        server = KubeAPIServer(etcd, api, url, ca, admin, tokens)
        kcm_port = free_ports(1)[0]
        server.controllers = spawn("kube-controller-manager", [
            kube_bin("kube-controller-manager"), f"--kubeconfig={server.kubeconfig(run / 'kcm.kubeconfig')}",
            "--controllers=namespace,disruption,podgc", "--leader-elect=false", f"--secure-port={kcm_port}",
            "--bind-address=127.0.0.1", "--use-service-account-credentials=false", "--profiling=false"],
            port=kcm_port, log_path=log.with_name(log.stem + "-controllers.log"), cwd=run)
        return server

    return retry_port_clash(start)


def _get(url: str, token: str = "", ca: Path | None = None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ssl.SSLError):
        return 0
