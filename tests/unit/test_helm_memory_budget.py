"""The Helm chart's memory limit holds its own connection cap: every connection at the most a head may hold
(alertd/web/head_gate.py) beside the processes' own memory, as docs/security.md says."""
from __future__ import annotations

from pathlib import Path

import yaml

from alertd.config.connections import ConnectionSettings
from alertd.web.head_gate import held_at_most

CHART = Path(__file__).resolve().parents[2] / "deploy/helm/alertd"
PROCESSES_MB = 250  # the engine and a receiver at rest with a fleet's incidents (docs/security.md)
UNITS = {"Mi": 1 << 20, "Gi": 1 << 30}


def test_the_charts_memory_limit_fits_its_connection_cap_at_the_documented_bound():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    limit = values["resources"]["limits"]["memory"]
    limit_bytes = int(limit[:-2]) * UNITS[limit[-2:]]
    cap = values["maxConnections"]
    assert '"connections" (dict "max_open" .Values.maxConnections)' in (CHART / "templates/_helpers.tpl").read_text()
    worst = cap * held_at_most(ConnectionSettings()) + PROCESSES_MB * (1 << 20)
    assert worst <= limit_bytes, (cap, limit, worst >> 20)
