"""The configuration file as config.schema.json admits it, once validated (alertd.config.settings._validated,
the one place the document becomes typed). Sections parsed by other layers' settings that take plain
JSON objects (notify) stay JSON objects here."""
from __future__ import annotations

from typing import TypedDict

from alertd.core.json_types import JSONObject

TrustedProxyDoc = TypedDict("TrustedProxyDoc", {"header": str, "from": list[str], "users": dict[str, str],
                                                "default_role": str}, total=False)


class TokenDoc(TypedDict, total=False):
    name: str  # required, with token
    role: str  # read, write, admin
    token: str


class BasicDoc(TypedDict, total=False):
    username: str  # required, with password
    password: str
    role: str


class AuthDoc(TypedDict, total=False):
    """``receiver.auth`` / ``api.auth`` after ``*_file`` resolution."""

    bearer_token: str
    tokens: list[TokenDoc]
    basic: BasicDoc
    trusted_proxy: TrustedProxyDoc


class ReceiverDoc(TypedDict, total=False):
    max_body_bytes: int
    auth: AuthDoc
    body_timeout: str
    max_backlog: int


class ApiDoc(TypedDict, total=False):
    auth: AuthDoc
    allowed_hosts: list[str]
    trusted_proxies: list[str]


class NormalizeDoc(TypedDict, total=False):
    cluster_label: str
    cluster: str
    node_labels: list[str]
    exporter_pod_pattern: str
    not_node_pattern: str
    node_map: dict[str, str]
    log_host_labels: list[str]
    log_line_fields: list[str]
    kubernetes: JSONObject  # declared once: alertd/enrich/settings.py (NodeIndexSettings)
    xid_labels: list[str]
    xid_annotation: str


class ConfigDoc(TypedDict, total=False):
    listen: str
    tls: JSONObject  # declared once: alertd/config/service.py
    data_dir: str
    external_url: str
    log: JSONObject  # declared once: alertd/config/service.py, as are storage, ha and processing
    storage: JSONObject
    connections: JSONObject  # declared once: alertd/config/connections.py
    receiver: ReceiverDoc
    api: ApiDoc
    rules: JSONObject  # declared once: alertd/config/service.py
    normalize: NormalizeDoc
    runbook_base_url: str
    installation_id: str
    ha: JSONObject
    processing: JSONObject
    notify: JSONObject  # declared once: alertd/integrations/registry.py (NotifySection)
    alertmanager: JSONObject  # declared once: alertd/alertmanager/settings.py
    classify: JSONObject  # declared once: alertd/config/classify.py
    enrich: JSONObject  # declared once: alertd/enrich/settings.py
    report: JSONObject  # declared once: alertd/report/settings.py
    sources: JSONObject  # declared once: alertd/sources/settings.py
    rma: JSONObject  # declared once: alertd/integrations/tickets.py


__all__ = ["ApiDoc", "AuthDoc", "BasicDoc", "ConfigDoc", "NormalizeDoc", "ReceiverDoc", "TokenDoc", "TrustedProxyDoc"]
