"""Small builders for alerts and engines used by the unit tests."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from alertd.engine.pipeline import Engine
from alertd.core.model import Alert
from alertd.receive.payload import fingerprint_of
from alertd.rules.ruleset import RuleSet, load_rules

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def alert(alertname: str, *, status: str = "firing", starts: float = 0, ends: float | None = None,
          annotations: dict | None = None, **labels: str) -> Alert:
    labels = {"alertname": alertname, "cluster": "prod", **labels}
    return Alert(
        fingerprint=fingerprint_of(labels),
        status=status,
        labels=labels,
        annotations=annotations or {},
        starts_at=at(starts),
        ends_at=at(ends) if ends is not None else None,
        received_at=at(starts),
    )


def xid(code: int, node: str = "gpu-node-1", gpu: str = "0", **labels: str) -> Alert:
    return alert("GPUXidError", xid=str(code), node=node, gpu=gpu, UUID=f"GPU-{node}-{gpu}",
                 pci_bus_id=f"00000000:{0x18 + int(gpu):02X}:00.0", Hostname="dcgm-exporter-abcde", **labels)


def resolved(a: Alert, ends: float) -> Alert:
    return Alert(fingerprint=a.fingerprint, status="resolved", labels=a.labels, annotations=a.annotations,
                 starts_at=a.starts_at, ends_at=at(ends), received_at=at(ends))


_RULES: RuleSet | None = None


def shipped_rules() -> RuleSet:
    global _RULES
    if _RULES is None:
        _RULES = load_rules([ROOT / "rules"])
    return _RULES


def engine() -> Engine:
    return Engine(shipped_rules())
