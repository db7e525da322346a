"""Service configuration: one YAML file, ${ENV} interpolation, validated by JSON Schema."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Mapping, cast

from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.core.errors import InvalidDocument, Problem
from alertd.core.json_types import JSONObject
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
from alertd.config.document import ConfigFile
from alertd.config.service import (ApiSettings, HAConfig, LogSettings, ProcessingSettings, ReceiverSettings, RulesSettings,
                                   StorageSettings, TlsSettings)
from alertd.core.yamlio import Marks, Path_, format_path, interpolate_env, load_yaml, mark_for

from alertd.rules.shipped import default_rule_paths


FILE = ConfigFile()  # the declared defaults of the top-level options


@dataclass(slots=True)
class Config:
    listen: str = FILE.listen
    data_dir: Path = FILE.data_dir
    external_url: str = FILE.external_url
    log: LogSettings = field(default_factory=LogSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    receiver: ReceiverSettings = field(default_factory=ReceiverSettings)  # body limits, the backlog cap
    connections: ConnectionSettings = field(default_factory=ConnectionSettings)  # per-connection deadlines, the cap
    receiver_auth: Credentials = field(default_factory=Credentials)
    api_auth: Credentials = field(default_factory=Credentials)
    api: ApiSettings = field(default_factory=ApiSettings)  # api.allowed_hosts: Host names accepted besides listen
    trusted_proxies: tuple[Network, ...] = ()  # api.trusted_proxies: whose X-Forwarded-For is believed
    rule_paths: list[str] = field(default_factory=default_rule_paths)
    rules: RulesSettings = field(default_factory=RulesSettings)  # rule_paths: what its files() names
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    runbook_base_url: str = FILE.runbook_base_url
    processing: ProcessingSettings = field(default_factory=ProcessingSettings)  # the engine's pace, what it holds
    console: bool | None = None
    retry_max_backoff: timedelta = FILE.notify.retry.max_backoff
    retry_max_attempts: int = FILE.notify.retry.max_attempts
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
    raw: JSONObject = field(default_factory=dict)  # the validated document, as read (config/ internals only)
    source: str = "<defaults>"

    @property
    def max_body_bytes(self) -> int:
        return self.receiver.max_body_bytes

    @property
    def body_timeout(self) -> float:
        """Seconds a request body may take to arrive."""
        return self.receiver.body_timeout

    @property
    def max_backlog(self) -> int:
        """Webhooks stored and not yet through the engine before new ones get 503; 0 = none."""
        return self.receiver.max_backlog

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
    file = ConfigFile.from_doc(doc)
    cfg = _read(doc, file, source, *_credentials(file, source))
    cfg.tls = file.tls.resolved(base) if file.tls else None
    links = registry.Links(runbook_base_url=cfg.runbook_base_url or "", alertmanager_url=cfg.alertmanager.web_url,
                           alertd_url=cfg.external_url, silences=cfg.alertmanager.enabled)
    cfg.console, cfg.retry_max_backoff, cfg.retry_max_attempts = \
        file.notify.console.on, file.notify.retry.max_backoff, file.notify.retry.max_attempts
    cfg.notify = registry.parse_settings(file.notify, links)
    _check_across(cfg, source, marks or {})
    return cfg


def _validated(doc: object, source: str, marks: Marks | None, env: Mapping[str, str] | None,
               base: Path | None) -> JSONObject:
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
    return cast(JSONObject, doc)  # a mapping, and now schema-valid: ConfigFile decodes it


def _follows(problem: Problem, unread: set[str]) -> bool:
    """``x: 'token' is a required property`` when ``x.token_file`` could not be read: it says nothing new."""
    missing = re.match(r"'(\w+)' is a required property$", problem.message.removeprefix(f"{problem.path}: "))
    return missing is not None and f"{problem.path}.{missing.group(1)}_file" in unread


def _credentials(file: ConfigFile, source: str) -> tuple[Credentials, Credentials]:
    """(receiver, api) credentials; the API's trusted proxies are checked here, read by alertd.web.guard."""
    try:
        receiver_auth = Credentials.from_settings(file.receiver.auth, default_name="alertmanager")
        api_auth = Credentials.from_settings(file.api.auth)
    except ValueError as exc:  # e.g. trusted_proxy.from: not an address or network
        raise InvalidDocument([Problem(source, f"auth: {exc}")]) from None
    try:
        trusted_networks(file.api.trusted_proxies)  # read again by _read, known valid then
    except ValueError as exc:
        raise InvalidDocument([Problem(source, f"api.trusted_proxies: {exc}")]) from None
    return receiver_auth, api_auth


def _read(doc: JSONObject, file: ConfigFile, source: str, receiver_auth: Credentials, api_auth: Credentials) -> Config:
    """Every section, parsed once: each into the settings its user reads (defined beside that user)."""
    return Config(
        listen=file.listen,
        data_dir=file.data_dir,
        external_url=file.external_url,
        log=file.log,
        storage=file.storage,
        receiver=file.receiver,
        connections=file.connections,
        receiver_auth=receiver_auth,
        api_auth=api_auth,
        api=file.api,
        trusted_proxies=trusted_networks(file.api.trusted_proxies),
        rules=file.rules,
        rule_paths=file.rules.files(),
        normalize=NormalizeConfig.of(file.normalize),
        runbook_base_url=file.runbook_base_url,
        processing=file.processing,
        installation_id=file.installation_id or "",
        ha=file.ha,
        alertmanager=file.alertmanager,
        classify=file.classify,
        enrich=file.enrich,
        kubernetes=file.normalize.kubernetes,
        report=file.report,
        sources=file.sources,
        rma=file.rma,
        raw=doc,
        source=source,
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
