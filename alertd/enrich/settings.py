"""The ``enrich`` config section, declared once (alertd/core/sections.py): what to search, where, and how hard
to try. :class:`EnrichSettings` is the whole section (deadline, retries, caps), :class:`LogSettings` its
``logs`` part and :class:`KubeSettings` its ``kube`` part; each is decoded from the document the generated
alertd/schemas/enrich.schema.json accepted, and read as decoded (docs/enrichment.md)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from alertd.core.sections import Seconds, Section, Span, duration, written, written_each

NonEmpty = Annotated[str, Meta(min_length=1)]
Names = tuple[NonEmpty, ...]

DEFAULT_URL = "http://127.0.0.1:9200"
DEFAULT_PATTERNS = ("NVRM", "Xid", "nvidia", "kernel")
DEFAULT_RETRY = ("30s", "2m", "10m")

DEFAULT_POOL_LABELS = (
    "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool", "agentpool", "node-pool", "nodepool", "pool",
)
DEFAULT_INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
DEFAULT_GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product",)
DEFAULT_OWNER_KEYS = ("alertd.io/owner", "owner", "user", "kubeflow.org/owner")


class LogBasicAuth(Section, frozen=True, kw_only=False):
    """Basic auth for the search backend."""

    username: str
    password: str


class LogAuth(Section, frozen=True):
    """How alertd signs in to the search backend (secrets: ${ENV} or *_file)."""

    basic: LogBasicAuth | None = None
    api_key: Annotated[str, Meta(min_length=1, description=(
        "Elasticsearch/OpenSearch API key (sent as Authorization: ApiKey)."))] = ""
    token: Annotated[str, Meta(min_length=1, description=(
        "Graylog access token (sent as basic auth <token>:token)."))] = ""


class LogFields(Section, frozen=True):
    """Which fields of a log document hold the host, the line and its time."""

    # anyOf where the hand-written schema had oneOf: a string never is an array, so the two accept the same
    # documents, and jsonschema words a value that neither accepts the same way.
    host: Annotated[NonEmpty | Annotated[Names, Meta(min_length=1)], Meta(description=(
        "Field(s) holding the host name, matched against the node name (Graylog: source; Fluent Bit: "
        "kubernetes_host or hostname)."), examples=["source", ["kubernetes_host", "hostname"]])] = ("source",)
    message: Annotated[NonEmpty, Meta(description="The log line's field.")] = "message"
    time: Annotated[NonEmpty, Meta(description=(
        "Date field (Graylog: yyyy-MM-dd HH:mm:ss.SSS, UTC); Fluent Bit: @timestamp."))] = "timestamp"
    extra: Annotated[Names, Meta(description=(
        "Further fields returned with each line, e.g. kubernetes_pod_name."))] = (
        "full_message", "level", "facility", "kubernetes_pod_name", "kubernetes_namespace_name",
        "kubernetes_container_name")

    @property
    def hosts(self) -> tuple[str, ...]:
        return (self.host,) if isinstance(self.host, str) else self.host


class LogWindow(Section, frozen=True):
    """The time searched around an alert's startsAt."""

    before: Annotated[Span, Meta(description="Search from this long before the alert's startsAt.")] = \
        written(Span.from_config, "10m")
    after: Annotated[Span, Meta(description="... to this long after it.")] = written(Span.from_config, "2m")
    align: Annotated[Span, Meta(description=(
        "Window edges are rounded out to this step so nearby alerts share one search; 0 disables."))] = \
        written(Span.from_config, "1m")


class LogBatch(Section, frozen=True):
    """Searches sent together in one _msearch."""

    max: Annotated[int, Meta(ge=1, description="Searches per _msearch.")] = 64
    linger: Annotated[Seconds, Meta(description="How long new searches wait to share one _msearch.")] = \
        duration("25ms")


class GraylogSettings(Section, frozen=True):
    """What the graylog backend asks."""

    api: Annotated[Literal["messages", "universal"], Meta(description=(
        "messages: POST /api/search/messages (Graylog 4.3+); universal: GET /api/search/universal/absolute "
        "(older)."))] = "messages"
    streams: Annotated[Names, Meta(description="Stream ids to search (default: all the user may read).")] = ()


class LogSettings(Section, frozen=True, kw_only=True):
    """Kernel-log lines of an incident's nodes, from Elasticsearch, OpenSearch or Graylog."""

    enabled: Annotated[bool, Meta(description="Search the logs (false: as if the part were absent).")] = True
    backend: Annotated[Literal["elasticsearch", "opensearch", "graylog"], Meta(description=(
        "elasticsearch: the official client (Elasticsearch 8 only); opensearch: opensearch-py; graylog: "
        "Graylog's REST search API."))]
    url: Annotated[str, Meta(pattern="^https?://", description="One base URL (or use urls).",
                             examples=["https://opensearch.logging.svc:9200"])] = ""
    urls: Annotated[Names, Meta(min_length=1, description=(
        f"Base URLs of the cluster nodes or the Graylog server. Default: [url], else [{DEFAULT_URL}]."))] = ()
    auth: LogAuth = msgspec.field(default_factory=LogAuth)
    ca_bundle: Annotated[str, Meta(description="PEM file of the CA that signed the server certificate.")] = ""
    verify_tls: Annotated[bool, Meta(description="Check the server's certificate.")] = True
    index: Annotated[NonEmpty, Meta(description="Index pattern (Elasticsearch/OpenSearch).",
                                    examples=["graylog_*", "fluentbit-*"])] = "graylog_*"
    fields: LogFields = msgspec.field(default_factory=LogFields)
    match_short_hostname: Annotated[bool, Meta(description=(
        "Also match the node's short host name (gpu-node-2 for gpu-node-2.example.com)."))] = True
    window: LogWindow = msgspec.field(default_factory=LogWindow)
    max_lines: Annotated[int, Meta(ge=1, le=10000, description=(
        "Lines fetched per node and window (earliest first)."))] = 50
    patterns: Annotated[Names, Meta(description="Phrases of which a line must contain at least one.")] = \
        DEFAULT_PATTERNS
    pattern_fields: Annotated[Names, Meta(description=(
        "Fields the patterns are searched in. Default [<message field>, facility]."))] = ()
    timeout: Annotated[Seconds, Meta(description="Per search request.")] = duration("10s")
    concurrency: Annotated[int, Meta(ge=1, description="Search requests in flight at once.")] = 4
    batch: LogBatch = msgspec.field(default_factory=LogBatch)
    cache_ttl: Annotated[Seconds, Meta(description="How long an answer per node+window is reused.")] = \
        duration("5m")
    failure_ttl: Annotated[Seconds, Meta(description="How long a failed search is not repeated.")] = duration("15s")
    ingest_lag: Annotated[Span, Meta(description=(
        "How long lines take to become searchable; windows closer to now than this are searched again "
        "later."))] = written(Span.from_config, "30s")
    graylog: GraylogSettings = msgspec.field(default_factory=GraylogSettings)

    def __post_init__(self) -> None:
        # Paths are appended to every URL: one trailing slash or none is the same server.
        urls = self.urls or ((self.url,) if self.url else (DEFAULT_URL,))
        msgspec.structs.force_setattr(self, "urls", tuple(u.rstrip("/") for u in urls))

    @property
    def search_fields(self) -> tuple[str, ...]:
        return self.pattern_fields or (self.fields.message, "facility")

    @property
    def source_fields(self) -> list[str]:
        out: list[str] = []
        for name in (self.fields.time, *self.fields.hosts, self.fields.message, *self.fields.extra):
            if name and name not in out:
                out.append(name)
        return out


@dataclass(frozen=True, slots=True)
class CostModel:
    """How a job loses work at a fault: its checkpoint interval and the time a restart takes."""

    checkpoint_interval: timedelta  # (the defaults are JobCostSettings')
    restart_time: timedelta

    def time_lost(self, ran: timedelta) -> timedelta:
        """The documented formula: lost work (half an interval, at most what ran) + the restart."""
        ran = max(ran, timedelta(0))
        work = ran if not self.checkpoint_interval else min(self.checkpoint_interval / 2, ran)
        return work + self.restart_time


CHECKPOINT_INTERVAL = "How often the job writes a checkpoint; 0: never (the whole run so far is lost)."
RESTART_TIME = "How long the job takes to be rescheduled and reload its checkpoint."


class CostOverride(Section, frozen=True):
    """A namespace's own cost model; what it leaves out is the jobs' default."""

    checkpoint_interval: Annotated[Span | UnsetType, Meta(description=CHECKPOINT_INTERVAL)] = UNSET
    restart_time: Annotated[Span | UnsetType, Meta(description=RESTART_TIME)] = UNSET


class JobCostSettings(Section, frozen=True):
    """Job impact per incident (docs/reliability-report.md): each hit job's gang, owner and estimated GPU-hours lost = gang GPUs x (min(checkpoint_interval / 2, time run) + restart_time)."""

    enabled: Annotated[bool, Meta(description="Find the jobs an incident hits.")] = True
    checkpoint_interval: Annotated[Span, Meta(description=CHECKPOINT_INTERVAL)] = written(Span.from_config, "1h")
    restart_time: Annotated[Span, Meta(description=RESTART_TIME)] = written(Span.from_config, "10m")
    namespaces: Annotated[dict[str, CostOverride], Meta(description=(
        "Namespace glob -> its own checkpoint_interval / restart_time (first match wins)."),
        examples=[{"research-*": {"checkpoint_interval": "30m"}, "batch": {"checkpoint_interval": "0"}}])] = \
        msgspec.field(default_factory=dict)
    owner_keys: Annotated[Names, Meta(description=(
        "Annotations or labels of the job object naming the person who owns it."))] = DEFAULT_OWNER_KEYS

    @property
    def default(self) -> CostModel:
        return CostModel(self.checkpoint_interval, self.restart_time)

    def for_namespace(self, ns: str) -> CostModel:
        over = next((o for pattern, o in self.namespaces.items() if fnmatch.fnmatchcase(ns, pattern)), None)
        if over is None:
            return self.default
        return CostModel(_or(over.checkpoint_interval, self.checkpoint_interval),
                         _or(over.restart_time, self.restart_time))


def _or(value: Span | UnsetType, default: Span) -> timedelta:
    """An override's value, or the default when it gives none (0 is a value: never checkpoints)."""
    return default if isinstance(value, UnsetType) else value


class KubeSettings(Section, frozen=True):
    """Kubernetes context of an incident's nodes: pods, owners, teams, events, and the jobs it hits."""

    enabled: Annotated[bool, Meta(description="Ask Kubernetes (false: as if the part were absent).")] = True
    kubeconfig: Annotated[str, Meta(description=(
        "kubeconfig file. Default: in-cluster service account when running in a pod, else ~/.kube/config."))] = ""
    context: Annotated[str, Meta(description="kubeconfig context. Default the current one.")] = ""
    in_cluster: Annotated[bool | UnsetType, Meta(description=(
        "Force (or forbid) the in-cluster service account. Default: in-cluster when KUBERNETES_SERVICE_HOST is "
        "set and no kubeconfig is given."))] = UNSET
    cluster: Annotated[str, Meta(description=(
        "Only enrich incidents of this cluster (one alertd serving several clusters). Default: all."),
        examples=["prod-gpu-1"])] = ""
    timeout: Annotated[Seconds, Meta(description="Per API request.")] = duration("5s")
    concurrency: Annotated[int, Meta(ge=1, description="API requests in flight at once.")] = 8
    cache_ttl: Annotated[Seconds, Meta(description="How long a node's context is reused.")] = duration("30s")
    owner_cache_ttl: Annotated[Seconds, Meta(description=(
        "How long owner objects and namespaces are reused."))] = duration("5m")
    team_labels: Annotated[Names, Meta(description=(
        "Label (or annotation) keys naming the owning team, tried on the top owner, then down the chain, the "
        "pod, the namespace."))] = ("team", "owner", "app.kubernetes.io/part-of")
    channel_annotations: Annotated[Names, Meta(description=(
        "Annotation (or label) keys naming the team's Slack channel."))] = \
        ("alertd.io/slack-channel", "alertd.dev/slack-channel")
    pool_labels: Annotated[Names, Meta(description="Node labels naming the node pool.")] = DEFAULT_POOL_LABELS
    instance_type_labels: Annotated[Names, Meta(description="Node labels naming the instance type.")] = \
        DEFAULT_INSTANCE_TYPE_LABELS
    gpu_product_labels: Annotated[Names, Meta(description="Node labels naming the GPU model.")] = \
        DEFAULT_GPU_PRODUCT_LABELS
    gpu_resources: Annotated[Names, Meta(description="Resource names (shell patterns) that count as GPUs.")] = \
        ("nvidia.com/gpu", "nvidia.com/mig-*")
    events_window: Annotated[Span, Meta(description="Node events newer than this are listed.")] = \
        written(Span.from_config, "1h")
    max_events: Annotated[int, Meta(ge=0, description="Node events listed per node.")] = 20
    max_pods: Annotated[int, Meta(ge=1, description="GPU pods examined per node.")] = 50
    max_owner_depth: Annotated[int, Meta(ge=1, le=20, description="Owner references followed up from a pod.")] = 6
    owner_plurals: Annotated[dict[str, NonEmpty], Meta(description=(
        "Resource plural per owner kind when it is not the lower-case kind + s."))] = \
        msgspec.field(default_factory=dict)
    jobs: JobCostSettings = msgspec.field(default_factory=JobCostSettings)


class EnrichSettings(Section, frozen=True):
    """Kernel-log evidence and Kubernetes context attached to incidents after they are stored. Never delays notifications. See docs/enrichment.md."""

    enabled: Annotated[bool, Meta(description="Enrich at all (when logs or kube is configured).")] = True
    deadline: Annotated[Seconds, Meta(description=(
        "How long an incident waits for its log search before it is marked logs_unavailable (the search "
        "continues and updates the incident when it answers)."))] = duration("3s")
    retry: Annotated[tuple[Seconds, ...], Meta(description=(
        "Delays between retries of a failed log search while the incident is open. Default "
        f"[{', '.join(DEFAULT_RETRY)}]."))] = \
        written_each(Seconds.from_config, DEFAULT_RETRY)
    recheck: Annotated[bool, Meta(description=(
        "Search again once a window that was still open (alert startsAt + after + ingest_lag) has "
        "closed."))] = True
    upgrade: Annotated[bool, Meta(description=(
        "Let an Xid found in the kernel log supply or upgrade the incident's classification."))] = True
    max_evidence: Annotated[int, Meta(ge=1, description="Log lines kept on one incident (Xid lines first).")] = 50
    max_pods: Annotated[int, Meta(ge=1, description="Pods listed on one incident.")] = 50
    max_events: Annotated[int, Meta(ge=0, description="Node events listed on one incident.")] = 20
    write_delay: Annotated[Seconds, Meta(description="Results arriving within this time are written together.")] = \
        duration("100ms")
    logs: LogSettings | None = None
    kube: KubeSettings | None = None

    def __post_init__(self) -> None:
        # A disabled part is as good as an absent one: its users test for None.
        if self.logs is not None and not self.logs.enabled:
            msgspec.structs.force_setattr(self, "logs", None)
        if self.kube is not None and not self.kube.enabled:
            msgspec.structs.force_setattr(self, "kube", None)


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
    "CostModel", "CostOverride", "DEFAULT_GPU_PRODUCT_LABELS", "DEFAULT_INSTANCE_TYPE_LABELS", "DEFAULT_PATTERNS",
    "DEFAULT_POOL_LABELS", "EnrichSettings", "GraylogSettings", "JobCostSettings", "KubeSettings", "LogAuth",
    "LogBasicAuth", "LogBatch", "LogFields", "LogSettings", "LogWindow", "NodeIndexSettings",
]
