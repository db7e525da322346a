"""A real Service (SQLite store, shipped rules) with its enricher on in-process log and Kubernetes backends:
what the enrichment tests share."""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from alertd.config.settings import Config
from alertd.enrich.enricher import Enricher
from alertd.enrich.kube import KubeContext
from alertd.enrich.kube_api import NotFound
from alertd.enrich.logs import LogLine
from alertd.enrich.searcher import LogSearcher
from alertd.enrich.settings import EnrichSettings, KubeSettings, LogBatch, LogSettings
from alertd.core.model import Alert
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.sqlite import SqliteStore
from testkit.fakes import Recorder, ScriptedLogBackend
from testkit.manual_timer import ManualTimer

RULES = Path(__file__).resolve().parents[1] / "rules"
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


class MemoryLogs(ScriptedLogBackend):
    """Answers from a dict node -> [message], each line three minutes before the window end."""

    name = "memory"

    def __init__(self, settings: LogSettings, lines: dict[str, list[str]] | None = None):
        super().__init__(settings)
        self.lines = lines or {}
        self.garbage = False

    def respond(self, queries):
        if self.garbage:
            return {"hits": "<html>oops</html>"}
        return [[LogLine(q.end - timedelta(minutes=3), q.node, m) for m in self.lines.get(q.node, [])] for q in queries]


class MemoryKube(KubeContext):
    """KubeContext whose API requests are answered from dicts in the API's JSON shape."""

    def __init__(self, objects: dict[tuple, dict], **settings: Any):
        super().__init__(KubeSettings(**settings), api_client=object())
        self.objects = objects
        self.fail: Exception | None = None

    async def _get(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict:
        self.stats.calls += 1
        if self.fail is not None:
            raise self.fail
        if method == "list_pod_for_all_namespaces":
            node = kwargs["field_selector"].split(",")[0].split("=", 1)[1]
            return {"items": [o for k, o in self.objects.items() if k[0] == "Pod" and o["spec"].get("nodeName") == node]}
        if method == "list_event_for_all_namespaces":
            node = kwargs["field_selector"].rsplit("=", 1)[1]
            return {"items": [o for k, o in self.objects.items() if k[0] == "Event" and o["involvedObject"]["name"] == node]}
        if method == "list_node":  # the fleet's size (enrich/fleet_size.py): one page holds them all here
            return {"items": [o for k, o in self.objects.items() if k[0] == "Node"], "metadata": {}}
        if method == "list_namespaced_pod":  # a job's gang (enrich/jobs.py)
            return {"items": [o for k, o in self.objects.items() if k[0] == "Pod" and o["metadata"].get("namespace") == args[0]],
                    "metadata": {}}
        if method == "read_node":
            key = ("Node", args[0])
        elif method == "read_namespace":
            key = ("Namespace", args[0])
        elif method == "get_namespaced_custom_object":
            group, version, ns, plural, name = args
            key = (plural, ns, name)
        else:  # read_namespaced_<kind>(name, namespace)
            key = (method.removeprefix("read_namespaced_"), args[1], args[0])
        if key not in self.objects:
            raise NotFound(method)
        return self.objects[key]


def cluster_objects() -> dict[tuple, dict]:
    def owner(kind, api, name):
        return [{"apiVersion": api, "kind": kind, "name": name, "controller": True, "uid": name}]

    objs: dict[tuple, dict] = {
        ("Node", "gpu-node-2"): {"metadata": {"name": "gpu-node-2",
                                              "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}},
                                 "spec": {"unschedulable": True},
                                 "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        ("Namespace", "ml"): {"metadata": {"name": "ml", "labels": {"team": "ml-infra"},
                                           "annotations": {"alertd.io/slack-channel": "#ml-oncall"}}},
        ("pytorchjobs", "ml", "llama"): {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                          "metadata": {"name": "llama", "namespace": "ml"}},
        ("Event", "1"): {"involvedObject": {"kind": "Node", "name": "gpu-node-2"}, "reason": "NodeNotSchedulable",
                         "type": "Normal", "message": "Node gpu-node-2 status is now: NodeNotSchedulable",
                         "source": {"component": "kubelet"},
                         "lastTimestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")},
    }
    for i in range(2):
        objs[("Pod", f"llama-worker-{i}")] = {
            "metadata": {"name": f"llama-worker-{i}", "namespace": "ml",
                         "ownerReferences": owner("PyTorchJob", "kubeflow.org/v1", "llama")},
            "spec": {"nodeName": "gpu-node-2", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Running"},
        }
    objs[("Pod", "cpu-only")] = {"metadata": {"name": "cpu-only", "namespace": "ml"},
                                 "spec": {"nodeName": "gpu-node-2", "containers": [{}]}, "status": {"phase": "Running"}}
    return objs


def alert(name: str, node: str, starts: datetime, fp: str = "", **labels: str) -> Alert:
    return Alert(fingerprint=fp or hashlib.sha256(f"{name}-{node}-{labels.get('gpu', '')}".encode()).hexdigest()[:16], status="firing",
                 labels={"alertname": name, "node": node, "cluster": "c1", **labels}, annotations={},
                 starts_at=starts, ends_at=None, received_at=datetime.now(timezone.utc))


class Harness:
    def __init__(self, tmp_path: Path, *, lines=None, kube: MemoryKube | None = None,
                 timer: ManualTimer | None = None, **enrich: Any):
        """With ``timer``, retries and rechecks (and the log searcher's clocks) wait on it: the test advances it."""
        self.settings = LogSettings(backend="opensearch", batch=LogBatch(linger=0.01), timeout=enrich.pop("timeout", 2.0),
                                    failure_ttl=0.05)
        self.backend = MemoryLogs(self.settings, lines)
        self.timer = timer
        clocks: dict[str, Any] = {"now": timer.wall, "monotonic": timer.monotonic} if timer is not None else {}
        self.searcher = LogSearcher(self.backend, self.settings, **clocks)
        opts = dict(deadline=0.5, write_delay=0.02, retry=(), logs=self.settings,
                    kube=kube.settings if kube else None)
        opts.update(enrich)
        self.enricher = Enricher(EnrichSettings(**opts), searcher=self.searcher, kube=kube,
                                 **({"timer": timer} if timer is not None else {}))
        self.recorder = Recorder()
        self.svc = Service(Config(data_dir=tmp_path, rule_paths=[str(RULES)]), SqliteStore(tmp_path / "a.sqlite3"),
                           load_rules([str(RULES)]), notifiers={"console": self.recorder}, enricher=self.enricher)

    async def __aenter__(self) -> "Harness":
        await self.svc.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.svc.stop()

    async def send(self, *alerts: Alert) -> None:
        await self.svc.receive_alerts(list(alerts))
        while await self.svc.process_pending():
            pass
        await self.svc.process_pending()

    def incident(self, node: str | None = None):
        incs = list(self.svc.engine.state.incidents.values())
        if node:
            incs = [i for i in incs if i.node == node and not i.fleet]
        assert incs, "no incident"
        return incs[0]
