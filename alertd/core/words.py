"""Counts in words: "1 node", "37 nodes"."""
from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural (``noun`` + "s") unless ``n`` is 1: every noun alertd counts is regular."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


__all__ = ["counted"]
