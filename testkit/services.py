"""Start real services on free loopback ports for the integration and e2e tests.

Each ``start_*`` function runs one service in its own process group under a
given work directory, waits until it answers, and returns a
:class:`RunningService` with ``url`` / ``port`` / ``dsn`` and ``stop()``.
Every started service is also stopped at interpreter exit. Plain Python with
no pytest dependency, so scripts and benchmarks can use it too.

Prometheus, Alertmanager and PostgreSQL come from Debian packages; OpenSearch
and Elasticsearch from the cache that ``scripts/install-test-deps.sh`` fills.
PostgreSQL, OpenSearch and Elasticsearch refuse to run as root: when the tests
run as root they run as the unprivileged ``alertd-test`` system user.

``python -m testkit.services check NAME...`` starts and stops services
and prints how long each took to become ready.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from testkit.process import (
    INSTALL_COMMAND,
    ReservedPort,
    RunningService,
    ServiceStartError,
    ServiceUnavailable,
    can_access,
    chown_tree,
    find_binary,
    free_port,
    free_ports,
    http_get,
    http_json,
    http_ready,
    retry_port_clash,
    run_as,
    runtime_dir,
    service_account,
    spawn,
    stop_all,
    wait_ready,
)

__all__ = [
    "INSTALL_COMMAND", "RunningService", "ServiceStartError", "ServiceUnavailable",
    "free_port", "free_ports", "http_get", "http_json", "stop_all", "start_prometheus",
    "start_alertmanager", "start_postgres", "start_opensearch", "start_elasticsearch",
]

CACHE_DIR = Path(os.environ.get("ALERTD_CACHE") or Path.home() / ".cache" / "alertd-test")
OPENSEARCH_VERSION = os.environ.get("ALERTD_OPENSEARCH_VERSION") or "2.19.6"
ELASTICSEARCH_VERSION = os.environ.get("ALERTD_ELASTICSEARCH_VERSION") or "8.19.21"
SEARCH_HEAP = os.environ.get("ALERTD_SEARCH_HEAP") or "512m"


# --- Prometheus and Alertmanager -------------------------------------------

def _start_prometheus_family(name: str, binary: str, config_yaml_path, workdir, flags: Sequence[str],
                             extra_args: Sequence[str], timeout: float,
                             port: ReservedPort | None = None) -> RunningService:
    """Prometheus and Alertmanager share their flags' shape and the /-/ready probe.

    ``flags`` may use ``{data}``: the service's data directory. ``port``: one reserved beforehand (another
    service's configuration names it), released once the service listens; None: a free one."""
    def start() -> RunningService:
        run, log, cleanups = runtime_dir(name, Path(workdir), None)
        port_ = port.port if port else free_port()
        svc = spawn(name, [
            binary, f"--config.file={Path(config_yaml_path).resolve()}",
            f"--web.listen-address=127.0.0.1:{port_}", *(f.format(data=run / "data") for f in flags), *extra_args,
        ], port=port_, log_path=log, cwd=run, cleanups=cleanups)
        svc.url = f"http://127.0.0.1:{port_}"
        try:
            wait_ready(svc, http_ready(svc.url + "/-/ready"), timeout)
        finally:
            if port:
                port.release()
        return svc

    return start() if port else retry_port_clash(start)


# Prometheus finds its Alertmanagers a few seconds after its rules first fire (the notifier's discovery
# updates are throttled to 5 s); what it sends before that is dropped, and a firing alert is sent again
# only after the resend delay, a minute by default. Every test would wait that minute for its first alert.
# Its scrape targets come through the same 5 s throttle: a test that starts Prometheus before alertd and
# Alertmanager (whose port it reserves beforehand: ReservedPort) spends those seconds starting them.
PROMETHEUS_FLAGS = ("--storage.tsdb.path={data}", "--web.enable-lifecycle", "--rules.alert.resend-delay=1s")


def start_prometheus(config_yaml_path, workdir, extra_args: Sequence[str] = (),
                     timeout: float = 60.0) -> RunningService:
    return _start_prometheus_family("prometheus", find_binary("prometheus"), config_yaml_path, workdir,
                                    PROMETHEUS_FLAGS, extra_args, timeout)


def start_alertmanager(config_yaml_path, workdir, extra_args: Sequence[str] = (),
                       timeout: float = 60.0, *, cluster_port: int = 0, peers: Sequence[int] = (),
                       port: ReservedPort | None = None) -> RunningService:
    """Alone by default; with ``cluster_port`` it gossips on 127.0.0.1:cluster_port with ``peers`` (ports).
    ``port``: one reserved beforehand, e.g. named by a Prometheus already started."""
    cluster = [f"--cluster.listen-address=127.0.0.1:{cluster_port}", "--cluster.advertise-address=127.0.0.1:"
               f"{cluster_port}", "--cluster.settle-timeout=2s", "--cluster.peer-timeout=5s",
               *(f"--cluster.peer=127.0.0.1:{p}" for p in peers)] if cluster_port else ["--cluster.listen-address="]
    return _start_prometheus_family("alertmanager", find_binary("prometheus-alertmanager", "alertmanager"),
                                    config_yaml_path, workdir, ["--storage.path={data}", *cluster], extra_args, timeout,
                                    port)


# --- PostgreSQL --------------------------------------------------------------

def _pg_bindir() -> Path:
    env = os.environ.get("ALERTD_PG_BIN")
    candidates = [env] if env else sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    if not env and shutil.which("initdb"):
        candidates.append(os.path.dirname(shutil.which("initdb")))
    for cand in candidates:
        if (Path(cand) / "initdb").exists() and (Path(cand) / "postgres").exists():
            return Path(cand)
    raise ServiceUnavailable(f"PostgreSQL server binaries (initdb, postgres) not found; run: {INSTALL_COMMAND}")


def start_postgres(workdir, database: str = "alertd", timeout: float = 60.0) -> RunningService:
    """PostgreSQL with fsync on, trust auth on 127.0.0.1, database ``database``.

    ``dsn`` is ``postgresql://postgres@127.0.0.1:PORT/<database>``.
    """
    bindir = _pg_bindir()
    account = service_account()

    def start() -> RunningService:
        run, log, cleanups = runtime_dir("postgres", Path(workdir), account)
        (run / "socket").mkdir(mode=0o700)
        chown_tree(run, account)
        # --no-sync only skips initdb's final flush; the server runs with fsync on.
        init = subprocess.run(
            [bindir / "initdb", "-D", run / "data", "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            cwd=run, capture_output=True, text=True, **run_as(account))
        if init.returncode != 0:
            for fn in cleanups:
                fn()
            raise ServiceStartError(f"initdb failed:\n{init.stdout}{init.stderr}")
        port = free_port()
        cmd = [bindir / "postgres", "-D", run / "data", "-p", port, "-k", run / "socket",
               "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on"]
        svc = spawn("postgres", cmd, port=port, log_path=log, cwd=run, account=account,
                    stop_signal=signal.SIGINT, cleanups=cleanups)

        def ready() -> bool:
            return subprocess.run(
                [bindir / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port),
                 "-U", "postgres", "-d", "postgres", "-t", "1"]).returncode == 0

        def pause() -> None:
            """A clean shutdown (SIGINT: fast mode) that keeps the data directory for resume()."""
            os.killpg(svc.proc.pid, signal.SIGINT)
            svc.proc.wait(30)

        def resume() -> None:
            svc.proc = spawn("postgres", cmd, port=port, log_path=log, cwd=run, account=account,
                             stop_signal=signal.SIGINT).proc
            wait_ready(svc, ready, timeout)

        svc.pause, svc.resume = pause, resume  # type: ignore[attr-defined]
        wait_ready(svc, ready, timeout)
        created = subprocess.run(
            [bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database],
            capture_output=True, text=True)
        if created.returncode != 0:
            svc.stop()
            raise ServiceStartError(f"createdb {database} failed: {created.stderr}")
        svc.dsn = f"postgresql://postgres@127.0.0.1:{port}/{database}"
        return svc

    return retry_port_clash(start)


# --- OpenSearch and Elasticsearch ---------------------------------------------

def _java_home() -> Path:
    """A JDK for the search servers. OpenSearch 2.x needs the security manager,
    which JDK 24+ removed, so the distribution's JDK 17/21 wins over JAVA_HOME."""
    candidates = [os.environ.get("ALERTD_JAVA_HOME")]
    candidates += sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*"))
    candidates += sorted(glob.glob("/usr/lib/jvm/java-21-openjdk-*"))
    candidates.append(os.environ.get("JAVA_HOME"))
    if shutil.which("java"):
        candidates.append(str(Path(os.path.realpath(shutil.which("java"))).parent.parent))
    for cand in candidates:
        if cand and (Path(cand) / "bin" / "java").exists():
            return Path(cand)
    raise ServiceUnavailable(f"no JDK found; run: {INSTALL_COMMAND}")


def _search_dist(kind: str, version: str) -> Path:
    dist = CACHE_DIR / f"{kind}-{version}"
    if not (dist / "bin" / kind).exists():
        raise ServiceUnavailable(f"{kind} {version} not found in {dist}; run: {INSTALL_COMMAND}")
    return dist


def _start_search(kind: str, version: str, workdir, timeout: float,
                  settings: dict[str, str] | None = None) -> RunningService:
    dist = _search_dist(kind, version)
    java = _java_home()
    account = service_account()
    env_prefix = {"opensearch": "OPENSEARCH", "elasticsearch": "ES"}[kind]

    def start() -> RunningService:
        run, log, cleanups = runtime_dir(kind, Path(workdir), account)
        conf = run / "config"
        shutil.copytree(dist / "config", conf)
        # The launcher runs from the (read-only) install dir: make the GC log,
        # heap dump and error file paths in jvm.options absolute.
        jvm = conf / "jvm.options"
        jvm.write_text(re.sub(r"(?<=[=:])(logs|data)\b", lambda m: f"{run}/{m.group(1)}",
                              jvm.read_text()))
        for sub in ("data", "logs", "tmp"):
            (run / sub).mkdir()
        http_port, transport_port = free_ports(2)
        values = {
            "cluster.name": f"alertd-test-{kind}",
            "node.name": "alertd-test",
            "discovery.type": "single-node",
            "network.host": "127.0.0.1",
            "http.port": str(http_port),
            "transport.port": str(transport_port),
            "path.data": str(run / "data"),
            "path.logs": str(run / "logs"),
            # A nearly full disk must not turn the test indices read-only.
            "cluster.routing.allocation.disk.threshold_enabled": "false",
            **(settings or {}),
        }
        with open(conf / f"{kind}.yml", "a") as fh:
            fh.write("\n# written by testkit/services.py\n")
            fh.writelines(f"{k}: {json.dumps(v)}\n" for k, v in values.items())
        chown_tree(run, account)
        home = dist
        if not can_access(account, dist / "bin" / kind, "-r"):
            # The cache is under root's 0700 home: give the service user a
            # hard-linked (else copied) tree it can read. Root keeps owning it.
            home = run / "dist"
            if subprocess.run(["cp", "-al", dist, home], capture_output=True).returncode != 0:
                shutil.rmtree(home, ignore_errors=True)
                shutil.copytree(dist, home, symlinks=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ES_", "OPENSEARCH_", "CLI_JAVA_OPTS"))}
        env.update({
            "HOME": str(run), f"{env_prefix}_JAVA_HOME": str(java), "JAVA_HOME": str(java),
            f"{env_prefix}_PATH_CONF": str(conf), f"{env_prefix}_TMPDIR": str(run / "tmp"),
            f"{env_prefix}_JAVA_OPTS": f"-Xms{SEARCH_HEAP} -Xmx{SEARCH_HEAP}",
            # Elasticsearch's launcher leaves a temp dir behind: keep it in the run dir.
            "CLI_JAVA_OPTS": f"-Djava.io.tmpdir={run / 'tmp'}",
        })
        svc = spawn(kind, [home / "bin" / kind], port=http_port, log_path=log, cwd=run,
                     env=env, account=account, cleanups=cleanups)
        svc.url = f"http://127.0.0.1:{http_port}"

        def healthy(body: bytes) -> bool:
            try:
                return json.loads(body).get("status") in ("yellow", "green")
            except ValueError:
                return False

        wait_ready(svc, http_ready(
            svc.url + "/_cluster/health?wait_for_status=yellow&timeout=1s", healthy), timeout)
        return svc

    return retry_port_clash(start)


def start_opensearch(workdir, timeout: float = 120.0) -> RunningService:
    """OpenSearch (integ-test-zip: no security plugin, plain http) on loopback."""
    return _start_search("opensearch", OPENSEARCH_VERSION, workdir, timeout)


def start_elasticsearch(workdir, timeout: float = 120.0) -> RunningService:
    """Elasticsearch 8 (integ-test-zip) on loopback, security off, plain http.

    The integ-test-zip has no ``rest-root`` module: ``GET /`` (the client's
    ``info()``) answers 405; use the cluster health or other APIs instead.
    """
    return _start_search("elasticsearch", ELASTICSEARCH_VERSION, workdir, timeout,
                         {"xpack.security.enabled": "false"})


# --- command line --------------------------------------------------------------

def _check(name: str, work: Path) -> RunningService:
    if name in ("prometheus", "alertmanager"):
        cfg = work / f"{name}.yml"
        cfg.write_text("global:\n  scrape_interval: 15s\n" if name == "prometheus" else
                       "route:\n  receiver: none\nreceivers:\n  - name: none\n")
        return {"prometheus": start_prometheus, "alertmanager": start_alertmanager}[name](cfg, work)
    return {"postgres": start_postgres, "opensearch": start_opensearch,
            "elasticsearch": start_elasticsearch}[name](work)


def main(argv: Sequence[str]) -> int:
    names = ("prometheus", "alertmanager", "postgres", "opensearch", "elasticsearch")
    if len(argv) < 2 or argv[0] != "check" or not set(argv[1:]) <= set(names):
        print(f"usage: python -m testkit.services check {{{','.join(names)}}}...",
              file=sys.stderr)
        return 2
    status = 0
    for name in argv[1:]:
        work = Path(tempfile.mkdtemp(prefix=f"alertd-check-{name}-"))
        try:
            t0 = time.monotonic()
            svc = _check(name, work)
            ready = time.monotonic() - t0
            svc.stop()
            print(f"{name}: ready in {ready:.1f} s at {svc.url or svc.dsn}, "
                  f"stopped in {time.monotonic() - t0 - ready:.1f} s")
        except (ServiceUnavailable, ServiceStartError) as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            status = 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
