"""Label values that come from alerts cannot grow /metrics without end."""
from __future__ import annotations

from alertd.core.service_metrics import MAX_ALERTNAMES, Metrics


def _series(metrics: Metrics) -> dict[str, float]:
    out = {}
    for line in metrics.exposition().decode().splitlines():
        if line.startswith("alertd_unclassified_gpu_alerts_total{"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_unclassified_alert_names_are_bounded_and_the_rest_counted_as_other():
    m = Metrics()
    names = [f"GPUNodeAlert_gpu-node-{i}" for i in range(MAX_ALERTNAMES + 40)]
    for name in names + names[:3]:  # a name seen before keeps its own series
        m.unclassified_gpu.labels(name).inc()
    series = _series(m)
    assert len(series) == MAX_ALERTNAMES + 1, len(series)
    assert series['alertd_unclassified_gpu_alerts_total{alertname="other"}'] == 40
    assert series[f'alertd_unclassified_gpu_alerts_total{{alertname="{names[0]}"}}'] == 2
    assert sum(series.values()) == len(names) + 3
