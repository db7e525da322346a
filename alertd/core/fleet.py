"""One GPU node as a fleet sample sees it: what the Kubernetes API says (enrich/fleet_size.py) and the store
keeps per day (store/report_tables.py), so GPU-days and cordoned nodes have a measured denominator."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeSample:
    node: str
    node_type: str  # the GPU product label, else the instance type label, else "unknown"
    gpus: int  # allocatable nvidia.com/gpu
    cordoned: bool  # spec.unschedulable


__all__ = ["NodeSample"]
