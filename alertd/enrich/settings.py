"""The ``enrich`` config section, parsed: what to search, where, and how hard to try.

Three frozen dataclasses, one per part of the section: :class:`EnrichSettings`
(the whole section: deadline, retries, caps), :class:`LogSettings` (``enrich.logs``)
and :class:`KubeSettings` (``enrich.kube``). Each has ``from_doc`` turning the
YAML document into typed values; the defaults here are the documented ones
(docs/enrichment.md, alertd/schemas/enrich.schema.json). The ``*Doc`` TypedDicts
are the section as that schema admits it (alertd/config/document.py's ConfigDoc
names them; the document is validated once, then read through them).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, TypedDict

from msgspec import Meta

from alertd.core.durations import parse_duration
from alertd.core.sections import Seconds, Section, duration

DEFAULT_PATTERNS = ("NVRM", "Xid", "nvidia", "kernel")

DEFAULT_POOL_LABELS = (
    "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool", "agentpool", "node-pool", "nodepool", "pool",
)
DEFAULT_INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
DEFAULT_GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product",)
DEFAULT_OWNER_KEYS = ("alertd.io/owner", "owner", "user", "kubeflow.org/owner")


class BasicAuthDoc(TypedDict, total=False):
    username: str  # required, with password
    password: str


class LogAuthDoc(TypedDict, total=False):
    basic: BasicAuthDoc
    api_key: str
    token: str


class LogFieldsDoc(TypedDict, total=False):
    host: str | list[str]
    message: str
    time: str
    extra: list[str]


class WindowDoc(TypedDict, total=False):
    before: str
    after: str
    align: str


class BatchDoc(TypedDict, total=False):
    max: int
    linger: str


class GraylogDoc(TypedDict, total=False):
    api: str  # messages | universal
    streams: list[str]


class LogsDoc(TypedDict, total=False):
    """``enrich.logs`` as enrich.schema.json admits it (durations are Prometheus duration strings)."""

    enabled: bool
    backend: str  # required: elasticsearch | opensearch | graylog
    url: str
    urls: list[str]
    auth: LogAuthDoc
    ca_bundle: str
    verify_tls: bool
    index: str
    fields: LogFieldsDoc
    match_short_hostname: bool
    window: WindowDoc
    max_lines: int
    patterns: list[str]
    pattern_fields: list[str]
    timeout: str
    concurrency: int
    batch: BatchDoc
    cache_ttl: str
    failure_ttl: str
    ingest_lag: str
    graylog: GraylogDoc


class CostModelDoc(TypedDict, total=False):
    """``enrich.kube.jobs`` and each of its ``namespaces``: durations."""

    checkpoint_interval: str
    restart_time: str


class JobCostDoc(CostModelDoc, total=False):
    enabled: bool
    namespaces: dict[str, CostModelDoc]
    owner_keys: list[str]


class KubeDoc(TypedDict, total=False):
    """``enrich.kube`` as enrich.schema.json admits it."""

    enabled: bool
    kubeconfig: str
    context: str
    in_cluster: bool
    cluster: str
    timeout: str
    concurrency: int
    cache_ttl: str
    owner_cache_ttl: str
    team_labels: list[str]
    channel_annotations: list[str]
    pool_labels: list[str]
    instance_type_labels: list[str]
    gpu_product_labels: list[str]
    gpu_resources: list[str]
    events_window: str
    max_events: int
    max_pods: int
    max_owner_depth: int
    owner_plurals: dict[str, str]
    jobs: JobCostDoc


class EnrichDoc(TypedDict, total=False):
    """The ``enrich`` section as enrich.schema.json admits it."""

    enabled: bool
    deadline: str
    retry: list[str]
    recheck: bool
    upgrade: bool
    max_evidence: int
    max_pods: int
    max_events: int
    write_delay: str
    logs: LogsDoc
    kube: KubeDoc




@dataclass(frozen=True, slots=True)
class LogSettings:
    """The ``enrich.logs`` config section, parsed."""

    backend: str = "opensearch"  # opensearch | elasticsearch | graylog
    urls: tuple[str, ...] = ("http://127.0.0.1:9200",)
    username: str = ""
    password: str = ""
    api_key: str = ""
    token: str = ""  # Graylog access token (sent as basic auth <token>:token)
    ca_bundle: str = ""
    verify_tls: bool = True
    index: str = "graylog_*"
    host_fields: tuple[str, ...] = ("source",)
    message_field: str = "message"
    time_field: str = "timestamp"
    extra_fields: tuple[str, ...] = ("full_message", "level", "facility", "kubernetes_pod_name",
                                     "kubernetes_namespace_name", "kubernetes_container_name")
    match_short_hostname: bool = True
    before: timedelta = timedelta(minutes=10)
    after: timedelta = timedelta(minutes=2)
    bucket: timedelta = timedelta(minutes=1)
    max_lines: int = 50
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    pattern_fields: tuple[str, ...] = ()  # default: the message field and facility
    timeout: float = 10.0
    concurrency: int = 4
    max_batch: int = 64
    linger: float = 0.025
    cache_ttl: float = 300.0
    failure_ttl: float = 15.0
    ingest_lag: timedelta = timedelta(seconds=30)
    graylog_api: str = "messages"  # messages (POST /api/search/messages) | universal (/api/search/universal/absolute)
    graylog_streams: tuple[str, ...] = ()

    @property
    def search_fields(self) -> tuple[str, ...]:
        return self.pattern_fields or (self.message_field, "facility")

    @property
    def source_fields(self) -> list[str]:
        out: list[str] = []
        for name in (self.time_field, *self.host_fields, self.message_field, *self.extra_fields):
            if name and name not in out:
                out.append(name)
        return out

    @classmethod
    def from_doc(cls, doc: LogsDoc | None) -> "LogSettings":
        doc = doc or {}
        d = cls()
        auth = doc.get("auth") or {}
        basic = auth.get("basic") or {}
        fields = doc.get("fields") or {}
        window = doc.get("window") or {}
        graylog = doc.get("graylog") or {}
        batch = doc.get("batch") or {}
        urls = doc.get("urls") or ([doc["url"]] if doc.get("url") else list(d.urls))
        host = fields.get("host", list(d.host_fields))
        return cls(
            backend=doc.get("backend", d.backend),
            urls=tuple(u.rstrip("/") for u in urls),
            username=basic.get("username", ""),
            password=basic.get("password", ""),
            api_key=auth.get("api_key", ""),
            token=auth.get("token", ""),
            ca_bundle=doc.get("ca_bundle", ""),
            verify_tls=doc.get("verify_tls", True),
            index=doc.get("index", d.index),
            host_fields=tuple([host] if isinstance(host, str) else host),
            message_field=fields.get("message", d.message_field),
            time_field=fields.get("time", d.time_field),
            extra_fields=tuple(fields.get("extra", d.extra_fields)),
            match_short_hostname=doc.get("match_short_hostname", True),
            before=parse_duration(window.get("before", "10m")),
            after=parse_duration(window.get("after", "2m")),
            bucket=parse_duration(window.get("align", "1m")),
            max_lines=int(doc.get("max_lines", d.max_lines)),
            patterns=tuple(doc.get("patterns", d.patterns)),
            pattern_fields=tuple(doc.get("pattern_fields", ())),
            timeout=parse_duration(doc.get("timeout", "10s")).total_seconds(),
            concurrency=int(doc.get("concurrency", d.concurrency)),
            max_batch=int(batch.get("max", d.max_batch)),
            linger=parse_duration(batch.get("linger", "25ms")).total_seconds(),
            cache_ttl=parse_duration(doc.get("cache_ttl", "5m")).total_seconds(),
            failure_ttl=parse_duration(doc.get("failure_ttl", "15s")).total_seconds(),
            ingest_lag=parse_duration(doc.get("ingest_lag", "30s")),
            graylog_api=graylog.get("api", d.graylog_api),
            graylog_streams=tuple(graylog.get("streams", ())),
        )


@dataclass(frozen=True, slots=True)
class CostModel:
    """How a job loses work at a fault: its checkpoint interval and the time a restart takes."""

    checkpoint_interval: timedelta = timedelta(hours=1)
    restart_time: timedelta = timedelta(minutes=10)

    def time_lost(self, ran: timedelta) -> timedelta:
        """The documented formula: lost work (half an interval, at most what ran) + the restart."""
        ran = max(ran, timedelta(0))
        work = ran if not self.checkpoint_interval else min(self.checkpoint_interval / 2, ran)
        return work + self.restart_time


@dataclass(frozen=True, slots=True)
class JobCostSettings:
    """``enrich.kube.jobs``: the default cost model and per-namespace overrides (globs, first match wins)."""

    enabled: bool = True
    default: CostModel = CostModel()
    namespaces: tuple[tuple[str, CostModel], ...] = ()
    owner_keys: tuple[str, ...] = DEFAULT_OWNER_KEYS

    def for_namespace(self, ns: str) -> CostModel:
        return next((m for pattern, m in self.namespaces if fnmatch.fnmatchcase(ns, pattern)), self.default)

    @classmethod
    def from_doc(cls, doc: JobCostDoc | None) -> "JobCostSettings":
        doc = doc or {}
        default = _model(doc, CostModel())
        return cls(enabled=doc.get("enabled", True), default=default,
                   namespaces=tuple((ns, _model(over, default)) for ns, over in (doc.get("namespaces") or {}).items()),
                   owner_keys=tuple(doc.get("owner_keys", DEFAULT_OWNER_KEYS)))


def _model(doc: CostModelDoc, base: CostModel) -> CostModel:
    interval, restart = doc.get("checkpoint_interval"), doc.get("restart_time")
    return CostModel(parse_duration(interval) if interval is not None else base.checkpoint_interval,
                     parse_duration(restart) if restart is not None else base.restart_time)


@dataclass(frozen=True, slots=True)
class KubeSettings:
    """The ``enrich.kube`` config section, parsed."""

    enabled: bool = True
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool | None = None  # None: in-cluster when KUBERNETES_SERVICE_HOST is set and no kubeconfig
    cluster: str = ""  # only incidents of this cluster ("" = every incident)
    timeout: float = 5.0
    concurrency: int = 8
    cache_ttl: float = 30.0
    owner_cache_ttl: float = 300.0
    team_labels: tuple[str, ...] = ("team", "owner", "app.kubernetes.io/part-of")
    channel_annotations: tuple[str, ...] = ("alertd.io/slack-channel", "alertd.dev/slack-channel")
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS
    instance_type_labels: tuple[str, ...] = DEFAULT_INSTANCE_TYPE_LABELS
    gpu_product_labels: tuple[str, ...] = DEFAULT_GPU_PRODUCT_LABELS
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/mig-*")
    events_window: timedelta = timedelta(hours=1)
    max_events: int = 20
    max_pods: int = 50
    max_owner_depth: int = 6
    owner_plurals: dict[str, str] = field(default_factory=dict)
    jobs: JobCostSettings = JobCostSettings()

    @classmethod
    def from_doc(cls, doc: KubeDoc | None) -> "KubeSettings":
        doc = doc or {}
        d = cls()
        return cls(
            enabled=doc.get("enabled", True),
            kubeconfig=doc.get("kubeconfig", ""),
            context=doc.get("context", ""),
            in_cluster=doc.get("in_cluster"),
            cluster=doc.get("cluster", ""),
            timeout=parse_duration(doc.get("timeout", "5s")).total_seconds(),
            concurrency=int(doc.get("concurrency", d.concurrency)),
            cache_ttl=parse_duration(doc.get("cache_ttl", "30s")).total_seconds(),
            owner_cache_ttl=parse_duration(doc.get("owner_cache_ttl", "5m")).total_seconds(),
            team_labels=tuple(doc.get("team_labels", d.team_labels)),
            channel_annotations=tuple(doc.get("channel_annotations", d.channel_annotations)),
            pool_labels=tuple(doc.get("pool_labels", d.pool_labels)),
            instance_type_labels=tuple(doc.get("instance_type_labels", d.instance_type_labels)),
            gpu_product_labels=tuple(doc.get("gpu_product_labels", d.gpu_product_labels)),
            gpu_resources=tuple(doc.get("gpu_resources", d.gpu_resources)),
            events_window=parse_duration(doc.get("events_window", "1h")),
            max_events=int(doc.get("max_events", d.max_events)),
            max_pods=int(doc.get("max_pods", d.max_pods)),
            max_owner_depth=int(doc.get("max_owner_depth", d.max_owner_depth)),
            owner_plurals=dict(doc.get("owner_plurals") or {}),
            jobs=JobCostSettings.from_doc(doc.get("jobs")),
        )


@dataclass(frozen=True, slots=True)
class EnrichSettings:
    """The whole ``enrich`` section; ``logs``/``kube`` are None when that part is absent or disabled."""

    enabled: bool = True
    deadline: float = 3.0
    retry: tuple[float, ...] = (30.0, 120.0, 600.0)
    recheck: bool = True
    max_evidence: int = 50
    max_pods: int = 50
    max_events: int = 20
    write_delay: float = 0.1
    upgrade: bool = True
    logs: LogSettings | None = None
    kube: KubeSettings | None = None

    @classmethod
    def from_doc(cls, doc: EnrichDoc | None) -> "EnrichSettings":
        doc = doc or {}
        d = cls()
        logs_doc, kube_doc = doc.get("logs"), doc.get("kube")
        logs = LogSettings.from_doc(logs_doc) if logs_doc is not None and logs_doc.get("enabled", True) else None
        kube = KubeSettings.from_doc(kube_doc) if kube_doc is not None and kube_doc.get("enabled", True) else None
        return cls(
            enabled=doc.get("enabled", True),
            deadline=parse_duration(doc.get("deadline", "3s")).total_seconds(),
            retry=tuple(parse_duration(r).total_seconds() for r in doc.get("retry", ["30s", "2m", "10m"])),
            recheck=doc.get("recheck", True),
            max_evidence=int(doc.get("max_evidence", d.max_evidence)),
            max_pods=int(doc.get("max_pods", d.max_pods)),
            max_events=int(doc.get("max_events", d.max_events)),
            write_delay=parse_duration(doc.get("write_delay", "100ms")).total_seconds(),
            upgrade=doc.get("upgrade", True),
            logs=logs,
            kube=kube,
        )


class NodeIndexSettings(Section, frozen=True):
    """Find the node of an exporter pod or an instance address through the Kubernetes API (credentials and cluster from enrich.kube). On when enrich.kube is configured."""

    enabled: Annotated[bool, Meta(description="Look nodes up (when enrich.kube is configured).")] = True
    refresh: Annotated[Seconds, Meta(description="How often the nodes' addresses are listed again.")] = duration("5m")
    ttl: Annotated[Seconds, Meta(description="How long a pod's or a pod IP's node is remembered.")] = duration("10m")
    failure_ttl: Annotated[Seconds, Meta(description=(
        "How long a lookup that found nothing or failed is not tried again."))] = duration("30s")
    wait: Annotated[Seconds, Meta(description=(
        "The longest an engine step waits for lookups; later answers serve the alerts sent again."))] = duration("2s")
    max_lookups: Annotated[int, Meta(ge=1, description="Lookups started per engine step at most.")] = 64


__all__ = [
    "CostModel", "DEFAULT_GPU_PRODUCT_LABELS", "JobCostSettings", "DEFAULT_INSTANCE_TYPE_LABELS", "DEFAULT_PATTERNS", "DEFAULT_POOL_LABELS",
    "EnrichDoc", "EnrichSettings", "JobCostDoc", "KubeDoc", "KubeSettings", "LogSettings", "LogsDoc",
    "NodeIndexSettings",
]
