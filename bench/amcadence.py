"""Hand-built replay stories delivered with Alertmanager's cadence, for paging checks and figures.

A story is a list of alert lifetimes (labels, when the rule fired, when it
resolved). ``deliver`` turns it into what Alertmanager sends to alertd: alerts
grouped by the route's ``group_by``; a new group's first notification
``group_wait`` after its first alert; then, at every ``group_interval`` tick of
that group, a notification when its alerts changed (a new alert, a
resolution) carrying every firing alert and the ones resolved since the last
notification, which then leave the group (dispatch/dispatch.go,
notify/notify.go DedupStage). A group that is only resolved alerts never
notified firing sends nothing. The output is the recording ``alertd replay``
reads: ``(received_at, webhook body)``.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
ZERO = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class Life:
    """One alert's life: its labels, when it fired (startsAt, seconds from T0) and resolved (None: never)."""

    labels: tuple[tuple[str, str], ...]
    start: float
    end: float | None = None

    @classmethod
    def of(cls, alertname: str, start: float, end: float | None = None, **labels: str) -> "Life":
        return cls(tuple(sorted({"alertname": alertname, "cluster": "prod", **labels}.items())), start, end)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(repr(self.labels).encode()).hexdigest()[:16]

    def wire(self, resolved: bool) -> dict[str, Any]:
        return {"status": "resolved" if resolved else "firing", "labels": dict(self.labels), "annotations": {},
                "startsAt": _iso(self.start), "endsAt": _iso(self.end) if resolved and self.end is not None else ZERO,
                "generatorURL": "", "fingerprint": self.fingerprint}


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _iso(seconds: float) -> str:
    return _at(seconds).isoformat().replace("+00:00", "Z")


def deliver(lives: Iterable[Life], *, group_by: tuple[str, ...] = ("alertname", "cluster", "node"),
            group_wait: float = 30, group_interval: float = 300) -> list[tuple[datetime, dict[str, Any]]]:
    """What Alertmanager would send for these lives, in arrival order."""
    groups: dict[tuple[str, ...], list[Life]] = {}
    for life in lives:
        labels = dict(life.labels)
        groups.setdefault(tuple(labels.get(k, "") for k in group_by), []).append(life)
    out: list[tuple[datetime, dict[str, Any]]] = []
    for key, members in groups.items():
        out += _group(key, members, group_wait, group_interval)
    return sorted(out, key=lambda e: e[0])


def _group(key: tuple[str, ...], lives: list[Life], wait: float, interval: float) -> list[tuple[datetime, dict[str, Any]]]:
    out = []
    first = min(life.start for life in lives)
    last_event = max(max(life.start, life.end if life.end is not None else life.start) for life in lives)
    t = first + wait
    sent_firing: set[str] = set()  # fingerprints last notified firing
    gone: set[str] = set()  # resolved and notified: left the group
    while True:
        present = [life for life in lives if life.start <= t and life.fingerprint not in gone]
        firing = [life for life in present if life.end is None or life.end > t]
        resolved = [life for life in present if life.end is not None and life.end <= t]
        now_firing = {life.fingerprint for life in firing}
        changed = now_firing != sent_firing or any(life.fingerprint in sent_firing for life in resolved)
        if changed and (firing or sent_firing):
            alerts = [life.wire(False) for life in firing] + [life.wire(True) for life in resolved
                                                               if life.fingerprint in sent_firing]
            body = {"version": "4", "groupKey": "{}:" + repr(key), "truncatedAlerts": 0,
                    "status": "firing" if firing else "resolved", "receiver": "alertd",
                    "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
                    "externalURL": "http://alertmanager:9093", "alerts": alerts}
            out.append((_at(t), body))
            sent_firing = now_firing
            gone |= {life.fingerprint for life in resolved}
        elif not firing:
            gone |= {life.fingerprint for life in resolved}
        if t > last_event and not changed:  # nothing more will change (a firing alert is only re-sent at
            return out                        # repeat_interval, which these stories do not reach)
        t += interval


def write_recording(path: str, deliveries: list[tuple[datetime, dict[str, Any]]]) -> None:
    """The deliveries as ``alertd replay FILE`` reads them (what ``serve --record`` writes)."""
    import json
    with open(path, "w", encoding="utf-8") as fh:
        for at, body in deliveries:
            fh.write(json.dumps({"received_at": at.isoformat().replace("+00:00", "Z"), "body": body}) + "\n")
