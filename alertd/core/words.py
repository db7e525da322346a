"""Counts and signal kinds in words: "1 node", "37 nodes", "exporter down"."""
from __future__ import annotations

# Signal kinds in a word or two, as titles counting nodes name them ("exporter down on 12", "NVLink 3").
SHORT = {"metrics_missing": "exporter down", "node_not_ready": "NotReady", "node_cordoned": "cordoned",
         "thermal": "thermal", "ecc": "ECC", "row_remap": "row remap", "nvlink": "NVLink", "gpu_check": "health check", "xid": "Xid (code unknown)",
         "gpu_quiet": "GPU quiet", "link_degraded": "link degraded"}


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural (``noun`` + "s") unless ``n`` is 1: every noun alertd counts is regular."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


__all__ = ["SHORT", "counted"]
