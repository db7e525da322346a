"""Small sections of the service's own: HTTPS, the log, the store, the receiver, the API, the rule files, the
engine's pace, several replicas (docs/ha.md).

Declared once each (alertd/core/sections.py): these declarations are the schema, the defaults and the
description of every option they hold."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from alertd.config.credentials import NETWORK_PATTERN, AuthSettings
from alertd.core.sections import Seconds, Section, duration
from alertd.rules.shipped import default_rule_paths


PemFile = Annotated[Path, Meta(extra_json_schema={"minLength": 1})]


class TlsSettings(Section, frozen=True):
    """Serve HTTPS: the certificate (chain) and key files, PEM. Both are read again on SIGHUP (certificate rotation without a restart)."""

    cert_file: Annotated[PemFile, Meta(description="The certificate and its chain; relative: to the config file.")]
    key_file: Annotated[PemFile, Meta(description="The certificate's private key; relative: to the config file.")]
    min_version: Annotated[Literal["TLS1.2", "TLS1.3"], Meta(description="The oldest TLS version accepted.")] = "TLS1.2"

    def resolved(self, base: Path | None) -> "TlsSettings":
        """Relative paths resolved against the configuration file's directory (alertd/web/tls.py loads them)."""
        def path(p: Path) -> Path:
            return p if p.is_absolute() or base is None else base / p
        return msgspec.structs.replace(self, cert_file=path(self.cert_file), key_file=path(self.key_file))


class LogSettings(Section, frozen=True):
    """How alertd logs: text for people, JSON lines for log pipelines."""

    format: Annotated[Literal["text", "json"], Meta(description="text, or json (JSON lines).")] = "text"
    level: Annotated[Literal["debug", "info", "warning", "error"], Meta(description="The least severe level logged.")] = "info"


class StorageSettings(Section, frozen=True):
    """Where alertd keeps its state: embedded SQLite, or PostgreSQL (several replicas, docs/ha.md)."""

    backend: Annotated[Literal["sqlite", "postgres"], Meta(description="sqlite (embedded) or postgres.")] = "sqlite"
    sqlite_path: Annotated[str, Meta(description="The SQLite database; empty: <data_dir>/alertd.sqlite3.")] = ""
    synchronous: Annotated[Literal["FULL", "NORMAL"], Meta(description=(
        "SQLite fsync policy. FULL survives power loss; NORMAL survives process crashes only."))] = "FULL"
    postgres_dsn: Annotated[str, Meta(description="libpq connection string, e.g. ${ALERTD_PG_DSN}.")] = ""
    retention: Annotated[Seconds, Meta(description=(
        "How long processed inbox rows (the redelivery dedup window) and delivered notifications are "
        "kept."))] = duration("24h")
    postgres_password: Annotated[str, Meta(description=(
        "PostgreSQL password, kept out of the DSN; give postgres_password_file to read it from a file."))] = ""
    incident_retention: Annotated[Seconds, Meta(description=(
        "How long resolved incidents (members, timeline, search facets) are kept; 0 keeps them forever. GPU "
        "history is kept. Pruned in small batches every five minutes."))] = duration("400d")


class ReceiverSettings(Section, frozen=True):
    """The webhook receiver (Alertmanager, CloudEvents): who may send, and how much."""

    max_body_bytes: Annotated[int, Meta(ge=1024, description=(
        "Larger webhook bodies get 413 (10 MiB by default)."))] = 10 * 1024 * 1024
    auth: AuthSettings | None = None
    body_timeout: Annotated[Seconds, Meta(description=(
        "A request body (webhook, Slack click) that has not fully arrived after this long is answered 408 and the "
        "connection closed."))] = duration("30s")
    max_backlog: Annotated[int, Meta(ge=0, description=(
        "Webhooks stored and not yet taken by the engine at which new webhooks get 503 with Retry-After "
        "(Alertmanager retries them), so a sustained overload cannot fill the disk; counted about once a second. "
        "0 = no limit. The default is about 800,000 alerts, about a minute of the engine's work on 2 cores, "
        "~0.5 GB of inbox log."))] = 100_000


class ApiSettings(Section, frozen=True):
    """The HTTP API and the web UI: who may call, and from where."""

    auth: AuthSettings | None = None
    allowed_hosts: Annotated[tuple[Annotated[str, Meta(min_length=1, pattern="^[^/:\\s]+$|^[0-9a-fA-F:]+$")], ...], Meta(
        description=("Host names alertd answers to while the API or the receiver has no credentials (DNS "
                     "rebinding): loopback names and addresses, the listen address and external_url's host always; "
                     "these besides (docs/security.md)."))] = ()
    trusted_proxies: Annotated[tuple[Annotated[str, Meta(pattern=NETWORK_PATTERN)], ...], Meta(description=(
        "Addresses or networks (CIDR) of TLS-terminating proxies: X-Forwarded-Proto (Secure session cookie) and "
        "X-Forwarded-For (login throttling) are believed from these only."))] = ()


class RulesSettings(Section, frozen=True):
    """Which rule files the service reads, and how often it looks at them for changes."""

    paths: Annotated[tuple[str, ...], Meta(min_length=1, description=(
        "Rule files or directories that replace the shipped rules; relative paths are relative to the config "
        "file. Default: the shipped rules (package data)."))] | msgspec.UnsetType = msgspec.UNSET
    site: Annotated[tuple[str, ...], Meta(description=(
        "The site's rule files or directories, read after the shipped rules (or rules.paths): a file named like "
        "a shipped one (routing.yml) replaces it, the others add to them. Relative to the config file."))] = ()
    watch_interval: Annotated[Seconds, Meta(description=(
        "How often the rule files are checked for changes (an edited ConfigMap, a new file); a change reloads "
        "the rules as SIGHUP does. 0 checks never."))] = duration("10s")

    def files(self, here: Path | None = None) -> list[str]:
        """paths (or the shipped rules), then site; relative ones against ``here``, the config file's directory,
        as Prometheus reads its rule_files."""
        def at(p: str) -> str:
            return str(here / p) if here is not None else p
        paths = [at(p) for p in self.paths] if not isinstance(self.paths, msgspec.UnsetType) else []
        return (paths or default_rule_paths()) + [at(p) for p in self.site]


class ProcessingSettings(Section, frozen=True):
    """The engine's pace and the incidents it holds in memory."""

    batch_size: Annotated[int, Meta(ge=1, description=(
        "Alerts per engine step; smaller steps keep webhook answers fast under load."))] = 256
    tick_interval: Annotated[Seconds, Meta(description=(
        "How often hold-downs and the watchdog are evaluated."))] = duration("1s")
    detailed_incidents: Annotated[int, Meta(ge=0, description=(
        "Open incidents the engine holds in full detail in memory. Past it, the node incidents folded into a "
        "storm's fleet incident are held summarised (no timeline in memory, shared signals; everything stays in "
        "the store), counted by alertd_incidents_summarised_open."))] = 10000


class HAConfig(Section, frozen=True):
    """Several replicas on one PostgreSQL database (docs/ha.md)."""

    lease_ttl: Annotated[Seconds, Meta(description=(
        "How long the engine lease lasts without renewal; a follower takes over this long after the leader "
        "dies."))] = duration("5s")
    renew_interval: Annotated[Seconds, Meta(description=(
        "Between lease renewals (and a follower's attempts). At most half of lease_ttl."))] = duration("1s")
    poll_interval: Annotated[Seconds, Meta(description=(
        "Between the leader's reads of the shared inbox when idle."))] = duration("20ms")
    advertise: Annotated[str, Meta(description=(
        "This replica's address as the others should see it; empty: listen."))] = ""


__all__ = ["ApiSettings", "HAConfig", "LogSettings", "ProcessingSettings", "ReceiverSettings", "RulesSettings", "StorageSettings",
           "TlsSettings"]
