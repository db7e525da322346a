"""The configuration file, declared once (alertd/core/sections.py): its top-level options and a part per
section, each section declared beside the code that reads it. config.schema.json is generated from this
declaration (alertd/config/schemafiles.py); the sections with a schema file of their own are referred to."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.config.classify import ClassifySettings
from alertd.config.connections import ConnectionSettings
from alertd.config.service import (ApiSettings, HAConfig, LogSettings, ProcessingSettings, ReceiverSettings,
                                   RulesSettings, StorageSettings, TlsSettings)
from alertd.core.sections import Section, written
from alertd.engine.normalize import NormalizeSettings
from alertd.enrich.settings import EnrichSettings, NodeIndexSettings
from alertd.integrations.registry import NotifySection
from alertd.integrations.tickets import RmaSettings
from alertd.report.settings import ReportSettings
from alertd.sources.settings import SourcesSettings

# What alertd/schemas/messages.py recognises a listen address's pattern by (its message shows examples).
LISTEN_PATTERN = "^(\\[[0-9a-fA-F:]+\\]|[^:\\s]+):[0-9]{1,5}$"


class NormalizeSection(NormalizeSettings, frozen=True):
    """How an alert's labels name its cluster, node and Xid, and where an exporter pod's node is looked up."""

    kubernetes: NodeIndexSettings = msgspec.field(default_factory=NodeIndexSettings)


class ConfigFile(Section, frozen=True):
    """alertd service configuration"""

    listen: Annotated[str, Meta(pattern=LISTEN_PATTERN, description="HOST:PORT to serve on.")] = "127.0.0.1:9095"
    tls: TlsSettings | None = None
    data_dir: Annotated[Path, Meta(description="Directory for the embedded database.")] = written(Path, "data")
    external_url: Annotated[str, Meta(description="How users reach alertd (for links in notifications).")] = ""
    log: LogSettings = msgspec.field(default_factory=LogSettings)
    storage: StorageSettings = msgspec.field(default_factory=StorageSettings)
    connections: ConnectionSettings = msgspec.field(default_factory=ConnectionSettings)
    receiver: ReceiverSettings = msgspec.field(default_factory=ReceiverSettings)
    api: ApiSettings = msgspec.field(default_factory=ApiSettings)
    rules: RulesSettings = msgspec.field(default_factory=RulesSettings)
    normalize: NormalizeSection = msgspec.field(default_factory=NormalizeSection)
    runbook_base_url: Annotated[str, Meta(description=(
        "Prefix for runbook page names from the rules (page name + .md is appended)."))] = \
        "https://github.com/alertd/alertd/blob/main/runbooks/"
    installation_id: Annotated[str, Meta(pattern="^[a-z0-9][a-z0-9-]{0,31}$", description=(
        "Names this installation in PagerDuty dedup keys and Slack button values, so two installations sharing a "
        "PagerDuty service or Slack app never act on each other's incidents. Default: generated at the first "
        "start and stored."))] | msgspec.UnsetType = msgspec.UNSET
    ha: HAConfig = msgspec.field(default_factory=HAConfig)
    processing: ProcessingSettings = msgspec.field(default_factory=ProcessingSettings)
    notify: Annotated[NotifySection, Meta(description=(
        "Notifiers: console, Slack, PagerDuty, Opsgenie, webhooks (see notify.schema.json)."))] = \
        msgspec.field(default_factory=NotifySection)
    alertmanager: Annotated[AlertmanagerSettings, Meta(description=(
        "The Alertmanager alertd talks back to (silences, truncated groups)."))] = \
        msgspec.field(default_factory=AlertmanagerSettings)
    classify: Annotated[ClassifySettings, Meta(description=(
        "The site's Prometheus rule files and rules API, for alerts that read recording rules (see "
        "classify.schema.json)."))] = msgspec.field(default_factory=ClassifySettings)
    enrich: Annotated[EnrichSettings, Meta(description=(
        "Kernel-log and Kubernetes enrichment (see enrich.schema.json)."))] = msgspec.field(default_factory=EnrichSettings)
    report: ReportSettings = msgspec.field(default_factory=ReportSettings)
    rma: RmaSettings = msgspec.field(default_factory=RmaSettings)
    sources: SourcesSettings = msgspec.field(default_factory=SourcesSettings)


__all__ = ["ConfigFile", "LISTEN_PATTERN", "NormalizeSection"]
