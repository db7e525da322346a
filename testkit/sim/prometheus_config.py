"""A prometheus.yml that scrapes the simulated cluster with the jobs a real GPU cluster has."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml


def write_prometheus_config(
    path: str | Path,
    sim_address: str,
    nodes: Iterable[str],
    *,
    cluster: str = "sim",
    alertmanager_url: str | None = None,
    rule_files: Iterable[str | Path] = (),
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    node_label: bool = True,
) -> Path:
    """Write a prometheus.yml that scrapes the simulator at sim_address (host:port).

    Jobs as on a real cluster: `dcgm-exporter` and `node-exporter` with one static
    target per node (labels node, cluster; __metrics_path__ per target), and
    `kube-state-metrics`. honor_labels on dcgm-exporter (keeps pod/namespace/
    container of the GPU's workload) and on kube-state-metrics.
    node_label=False: no `node` target label; `instance` is "<node>:<port>" instead
    (sites whose only node identity is the instance or dcgm's Hostname).
    """
    nodes = list(nodes)

    def per_node(suffix: str) -> list[dict[str, Any]]:
        port = 9400 if suffix == "metrics" else 9100
        return [
            {
                "targets": [sim_address],
                "labels": {**({"node": n} if node_label else {"instance": f"{n}:{port}"}), "cluster": cluster,
                           "__metrics_path__": f"/nodes/{n}/{suffix}"},
            }
            for n in nodes
        ]

    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": evaluation_interval,
            "external_labels": {"cluster": cluster},
        },
        "rule_files": [str(Path(p).resolve()) for p in rule_files],
        "scrape_configs": [
            {"job_name": "dcgm-exporter", "honor_labels": True, "static_configs": per_node("metrics")},
            {"job_name": "node-exporter", "static_configs": per_node("node-metrics")},
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "metrics_path": "/ksm/metrics",
                "static_configs": [{"targets": [sim_address], "labels": {"cluster": cluster}}],
            },
        ],
    }
    if alertmanager_url:
        m = re.match(r"^(https?)://([^/]+)(/.*)?$", alertmanager_url)
        if not m:
            raise ValueError(f"bad Alertmanager URL {alertmanager_url!r}")
        am: dict[str, Any] = {"scheme": m.group(1), "static_configs": [{"targets": [m.group(2)]}]}
        if m.group(3) and m.group(3) != "/":
            am["path_prefix"] = m.group(3)
        config["alerting"] = {"alertmanagers": [am]}
    path = Path(path)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
