"""An overheating rack's alerts, in the shapes deploy/prometheus/gpu-alerts.yml gives them (labels and annotation
templates): for the thermal storm's tests and bench/thermal_storm.py."""
from __future__ import annotations

from alertd.core.model import Alert
from bench.fleetsim.rules import expand, load_alert_rules

from testkit.builders import alert

SHIPPED = {r.name: r for r in load_alert_rules()}


def shipped(name: str, node: str, gpu: int, value: float, *, rack: str = "r07", starts: float = 0,
            **extra: str) -> Alert:
    """One alert as the shipped rule would send it: its labels, and its annotations expanded with ``value``."""
    rule = SHIPPED[name]
    labels = {"node": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "label_rack": rack,
              "Hostname": f"dcgm-exporter-{node}", **rule.labels, **extra}
    annotations = {k: expand(v, {**labels, "alertname": name}, value) for k, v in rule.annotations.items()}
    return alert(name, starts=starts, annotations=annotations, **labels)


def hot_node(node: str, temps: list[float], starts: float = 0, rack: str = "r07") -> list[Alert]:
    """A node whose GPUs throttle for heat (HW thermal slowdown, 0x40) and run hot."""
    out = []
    for gpu, temp in enumerate(temps):
        out.append(shipped("GPUClockEventThrottling", node, gpu, 64, rack=rack, starts=starts,
                           clock_event_reasons="64"))
        out.append(shipped("GPUTemperatureHigh", node, gpu, temp, rack=rack, starts=starts))
    return out


def rack_temps(n: int, gpus: int = 8) -> list[float]:
    return [86 + (n * 8 + g) % 10 for g in range(gpus)]
