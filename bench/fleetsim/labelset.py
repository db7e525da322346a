"""Label sets as Prometheus and Alertmanager identify and order them."""
from __future__ import annotations

from typing import Mapping

_OFFSET64 = 14695981039346656037
_PRIME64 = 1099511628211
_MASK = (1 << 64) - 1
_SEP = 0xFF


def fingerprint(labels: Mapping[str, str]) -> str:
    """model.LabelSet.Fingerprint: FNV-1a 64 over sorted names and values, each followed by 0xff.

    Alertmanager puts it, as 16 hex digits, in the webhook's ``fingerprint``.
    """
    h = _OFFSET64
    for name in sorted(labels):
        for part in (name, labels[name]):
            for b in part.encode():
                h = ((h ^ b) * _PRIME64) & _MASK
            h = ((h ^ _SEP) * _PRIME64) & _MASK
    return f"{h:016x}"


def label_string(labels: Mapping[str, str]) -> str:
    """model.LabelSet.String: ``{a="x", b="y"}`` sorted by name (Go's %q quoting)."""
    import json

    return "{" + ", ".join(f"{k}={json.dumps(labels[k], ensure_ascii=False)}" for k in sorted(labels)) + "}"


def alert_sort_key(labels: Mapping[str, str]) -> tuple[object, ...]:
    """types.AlertSlice.Less: job, then instance (present before absent), then LabelSet.Before."""
    key: list[object] = []
    for name in ("job", "instance"):
        value = labels.get(name)
        key.append((0, value) if value is not None else (1, ""))
    names = sorted(labels)
    key.append((len(names), names, [labels[n] for n in names]))
    return tuple(key)
