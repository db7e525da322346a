"""Service configuration: one YAML file, ${ENV} interpolation, validated by JSON Schema."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Mapping, cast

from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.core.durations import parse_duration
from alertd.core.errors import InvalidDocument, Problem
from alertd.integrations import registry
from alertd.integrations.base import NotifierSettings
from alertd.integrations.tickets import RmaSettings
from alertd.engine.normalize import NormalizeConfig
from alertd.enrich.settings import EnrichSettings, NodeIndexSettings
from alertd.report.settings import ReportSettings
from alertd.sources.settings import SourcesSettings
from alertd.schemas import problems
from alertd.config.classify import ClassifySettings
from alertd.config.connections import ConnectionSettings
from alertd.config.secrets import resolve_files
from alertd.config.credentials import Credentials, Network, trusted_networks
from alertd.config.document import ConfigDoc, NormalizeDoc
from alertd.config.service import HAConfig, LogSettings, ProcessingSettings, RulesSettings, StorageSettings, TlsSettings
from alertd.core.yamlio import Marks, Path_, format_path, interpolate_env, load_yaml, mark_for

from alertd.rules.shipped import default_rule_paths


@dataclass(slots=True)
class Config:
    listen: str = "127.0.0.1:9095"
    data_dir: Path = Path("data")
    external_url: str = ""
    log: LogSettings = field(default_factory=LogSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    max_body_bytes: int = 10 * 1024 * 1024
    body_timeout: float = 30.0  # seconds a request body may take to arrive
    max_backlog: int = 100_000  # webhooks stored and not yet through the engine before new ones get 503; 0 = none
    connections: ConnectionSettings = field(default_factory=ConnectionSettings)  # per-connection deadlines, the cap
    receiver_auth: Credentials = field(default_factory=Credentials)
    api_auth: Credentials = field(default_factory=Credentials)
    allowed_hosts: tuple[str, ...] = ()  # api.allowed_hosts: Host names accepted besides the listen address
    trusted_proxies: tuple[Network, ...] = ()  # api.trusted_proxies: whose X-Forwarded-For is believed
    rule_paths: list[str] = field(default_factory=default_rule_paths)
    rules: RulesSettings = field(default_factory=RulesSettings)  # rule_paths: what its files() names
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    runbook_base_url: str = "https://github.com/alertd/alertd/blob/main/runbooks/"
    processing: ProcessingSettings = field(default_factory=ProcessingSettings)  # the engine's pace, what it holds
    console: bool | None = None
    retry_max_backoff: timedelta = timedelta(minutes=5)
    retry_max_attempts: int = 15
    installation_id: str = ""  # prefixes PagerDuty dedup keys and Slack action values; stored at first start
    ha: HAConfig = field(default_factory=HAConfig)
    alertmanager: AlertmanagerSettings = field(default_factory=AlertmanagerSettings)  # silences, reconciliation
    classify: ClassifySettings = field(default_factory=ClassifySettings)  # recording rules: files and rules API
    notify: dict[str, NotifierSettings] = field(default_factory=dict)  # integration name -> its typed settings (parsed once)
    enrich: EnrichSettings = field(default_factory=EnrichSettings)  # logs and Kubernetes context; enrich.kube: the API
    kubernetes: NodeIndexSettings = field(default_factory=NodeIndexSettings)  # normalize.kubernetes: node lookups
    report: ReportSettings = field(default_factory=ReportSettings)  # the reliability report's samples and digest
    sources: SourcesSettings = field(default_factory=SourcesSettings)  # kube-health watch, CloudEvents receiver
    rma: RmaSettings = field(default_factory=RmaSettings)  # where an approved RMA handoff opens its tickets
    tls: TlsSettings | None = None  # HTTPS on the listener; None: plain HTTP
    raw: ConfigDoc = field(default_factory=lambda: ConfigDoc())  # the validated document, as read (config/ internals only)
    source: str = "<defaults>"

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


def _drop_empty(value: Any) -> Any:
    """A section left with only comments loads as null: treat it as absent."""
    if isinstance(value, dict):
        return {k: _drop_empty(v) for k, v in value.items() if v is not None}
    return value


def parse_config(doc: object, source: str, marks: Marks | None = None, env: Mapping[str, str] | None = None,
                 base: Path | None = None) -> Config:
    """The typed configuration of a YAML document: validated first (every problem at once), then read
    section by section, then checked across sections."""
    doc = _validated(doc, source, marks, env, base)
    cfg = _read(doc, source, *_credentials(doc, source))
    cfg.tls = TlsSettings.from_doc(doc["tls"]).resolved(base) if doc.get("tls") else None
    links = registry.Links(runbook_base_url=cfg.runbook_base_url or "", alertmanager_url=cfg.alertmanager.web_url,
                           alertd_url=cfg.external_url, silences=cfg.alertmanager.enabled)
    notify = registry.NotifySection.from_doc(doc.get("notify"))
    cfg.console, cfg.retry_max_backoff, cfg.retry_max_attempts = \
        notify.console.on, notify.retry.max_backoff, notify.retry.max_attempts
    cfg.notify = registry.parse_settings(notify, links)
    _check_across(cfg, source, marks or {})
    return cfg


def _validated(doc: object, source: str, marks: Marks | None, env: Mapping[str, str] | None,
               base: Path | None) -> ConfigDoc:
    """${ENV} interpolated, secret files read, the schema checked: raise listing every problem."""
    doc = {} if doc is None else _drop_empty(doc)
    if not isinstance(doc, dict):
        raise InvalidDocument([Problem(source, "the configuration must be a YAML mapping", 1, 1)])
    missing: list[tuple[Path_, str]] = []
    doc = interpolate_env(doc, env, missing=missing)
    found = [
        Problem(source, f"environment variable ${{{name}}} is not set", *mark_for(marks or {}, path), format_path(path))
        for path, name in missing
    ]
    doc, from_files, secret_paths = resolve_files(doc, source, marks, base)
    found += from_files
    unread = {p.path for p in from_files}
    found += [p for p in problems("config", doc, source, marks, secret_paths=secret_paths) if not _follows(p, unread)]
    if found:
        raise InvalidDocument(found)
    return cast(ConfigDoc, doc)  # a mapping, and now schema-valid: typed from here on


def _follows(problem: Problem, unread: set[str]) -> bool:
    """``x: 'token' is a required property`` when ``x.token_file`` could not be read: it says nothing new."""
    missing = re.match(r"'(\w+)' is a required property$", problem.message.removeprefix(f"{problem.path}: "))
    return missing is not None and f"{problem.path}.{missing.group(1)}_file" in unread


def _credentials(doc: ConfigDoc, source: str) -> tuple[Credentials, Credentials]:
    """(receiver, api) credentials; the API's trusted proxies are checked here, read by alertd.web.guard."""
    try:
        receiver_auth = Credentials.from_doc(doc.get("receiver", {}).get("auth"), default_name="alertmanager")
        api_auth = Credentials.from_doc(doc.get("api", {}).get("auth"))
    except ValueError as exc:  # e.g. trusted_proxy.from: not an address or network
        raise InvalidDocument([Problem(source, f"auth: {exc}")]) from None
    try:
        trusted_networks(doc.get("api", {}).get("trusted_proxies"))  # read again by _read, known valid then
    except ValueError as exc:
        raise InvalidDocument([Problem(source, f"api.trusted_proxies: {exc}")]) from None
    return receiver_auth, api_auth


def _read(doc: ConfigDoc, source: str, receiver_auth: Credentials, api_auth: Credentials) -> Config:
    """Every section, parsed once: each into the settings its user reads (defined beside that user)."""
    receiver = doc.get("receiver", {})
    rules = RulesSettings.from_doc(doc.get("rules"))
    defaults = Config()
    return Config(
        listen=doc.get("listen", defaults.listen),
        data_dir=Path(doc.get("data_dir", "data")),
        external_url=doc.get("external_url", ""),
        log=LogSettings.from_doc(doc.get("log")),
        storage=StorageSettings.from_doc(doc.get("storage")),
        max_body_bytes=receiver.get("max_body_bytes", defaults.max_body_bytes),
        body_timeout=parse_duration(receiver.get("body_timeout", "30s")).total_seconds(),
        max_backlog=receiver.get("max_backlog", defaults.max_backlog),
        connections=ConnectionSettings.from_doc(doc.get("connections")),
        receiver_auth=receiver_auth,
        api_auth=api_auth,
        allowed_hosts=tuple(str(h) for h in doc.get("api", {}).get("allowed_hosts") or ()),
        trusted_proxies=trusted_networks(doc.get("api", {}).get("trusted_proxies")),
        rules=rules,
        rule_paths=rules.files(),
        normalize=_normalize(doc.get("normalize", {})),
        runbook_base_url=doc.get("runbook_base_url", defaults.runbook_base_url),
        processing=ProcessingSettings.from_doc(doc.get("processing")),
        installation_id=doc.get("installation_id", ""),
        ha=HAConfig.from_doc(doc.get("ha")),
        alertmanager=AlertmanagerSettings.from_doc(doc.get("alertmanager")),
        classify=ClassifySettings.from_doc(doc.get("classify")),
        enrich=EnrichSettings.from_doc(doc.get("enrich")),
        kubernetes=NodeIndexSettings.from_doc(doc.get("normalize", {}).get("kubernetes")),
        report=ReportSettings.from_doc(doc.get("report")),
        sources=SourcesSettings.from_doc(doc.get("sources")),
        rma=RmaSettings.from_doc(doc.get("rma")),
        raw=doc,
        source=source,
    )


def _normalize(norm: NormalizeDoc) -> NormalizeConfig:
    base = NormalizeConfig()
    return NormalizeConfig(
        cluster_label=norm.get("cluster_label", base.cluster_label),
        cluster_default=norm.get("cluster", base.cluster_default),
        node_labels=tuple(norm.get("node_labels", base.node_labels)),
        xid_labels=tuple(norm.get("xid_labels", base.xid_labels)),
        xid_annotation=norm.get("xid_annotation", base.xid_annotation),
        exporter_pod_pattern=norm.get("exporter_pod_pattern", base.exporter_pod_pattern),
        node_map=dict(norm.get("node_map") or {}),
        not_node_pattern=norm.get("not_node_pattern", base.not_node_pattern),
        log_host_labels=tuple(norm.get("log_host_labels", base.log_host_labels)),
        log_line_fields=tuple(norm.get("log_line_fields", base.log_line_fields)),
    )


def listen_port_problem(listen: str) -> str:
    """What is wrong with HOST:PORT's port, or "": the operating system would take 99999 modulo 65536."""
    _, _, port = listen.rpartition(":")
    if not port.isdigit():
        return f"{listen!r} has no port: use HOST:PORT, e.g. 127.0.0.1:9095"
    if not 1 <= int(port) <= 65535:
        return f"port {int(port)} of {listen!r} is out of range: a port is 1-65535"
    return ""


def _check_across(cfg: Config, source: str, marks: Marks) -> None:
    """What the schema cannot say: values that need another one, or a regular expression that compiles."""
    port_problem = listen_port_problem(cfg.listen)
    if port_problem:
        raise InvalidDocument([Problem(source, f"listen: {port_problem}", *mark_for(marks, ("listen",)), "listen")])
    if cfg.storage.backend == "postgres" and not cfg.storage.postgres_dsn:
        raise InvalidDocument([Problem(source, "storage.backend is postgres but storage.postgres_dsn is empty",
                                       *mark_for(marks, ("storage",)), "storage")])
    for key in ("exporter_pod_pattern", "not_node_pattern"):
        try:
            re.compile(getattr(cfg.normalize, key))
        except re.error as exc:
            raise InvalidDocument([Problem(source, f"normalize.{key} is not a regular expression: {exc}",
                                           *mark_for(marks, ("normalize", key)), f"normalize.{key}")]) from None
    if cfg.ha.renew_interval * 2 > cfg.ha.lease_ttl:
        raise InvalidDocument([Problem(source, "ha.renew_interval must be at most half of ha.lease_ttl, or a healthy "
                                       "leader would lose its lease", *mark_for(marks, ("ha",)), "ha")])


def load_config(path: Path | str | None, env: Mapping[str, str] | None = None) -> Config:
    if path is None:
        return parse_config({}, "<defaults>", env=env)
    doc, marks = load_yaml(path, with_marks=True)
    cfg = parse_config(doc, str(path), marks, env, base=Path(path).resolve().parent)
    cfg.rule_paths = cfg.rules.files(Path(path).parent)
    return cfg
