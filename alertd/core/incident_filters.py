"""The incident list's filters: one list for the API, the web UI's form and the CLI's flags.

``GET /api/v1/incidents`` and ``/ui/incidents`` take each as a query parameter
(alertd/web/params.py checks them), the UI's filter form shows a field per
filter, and ``alertd incidents list`` has a ``--<name>`` flag per filter that it
passes on. A filter added here appears in all three; the OpenAPI document
describes the same list (tests/unit/test_incident_filters.py).
"""
from __future__ import annotations

from dataclasses import dataclass

SORTS = ("worst", "newest")  # ?sort= / --sort: every list's order (alertd/web/worst_first.py), or by sequence alone


@dataclass(frozen=True, slots=True)
class IncidentFilter:
    name: str  # the query parameter, and the CLI flag --<name>
    label: str  # the UI form's label
    hint: str = ""  # what it takes: the form's placeholder, the CLI flag's help
    choice: bool = False  # one of a fixed set (status, severity): the form shows a select


INCIDENT_FILTERS = (
    IncidentFilter("status", "Status", choice=True),
    IncidentFilter("severity", "Severity", choice=True),
    IncidentFilter("cluster", "Cluster"),
    IncidentFilter("node", "Node"),
    IncidentFilter("gpu", "GPU", "UUID, serial or PCI id"),
    IncidentFilter("signal", "Signal", "xid, ecc, thermal…"),
    IncidentFilter("xid", "Xid", "79"),
    IncidentFilter("team", "Team"),
    IncidentFilter("since", "Updated since", "24h or RFC 3339"),
    IncidentFilter("until", "Opened until", "RFC 3339"),
)
FILTER_NAMES = tuple(f.name for f in INCIDENT_FILTERS)

__all__ = ["FILTER_NAMES", "INCIDENT_FILTERS", "IncidentFilter"]
