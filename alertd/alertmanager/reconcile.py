"""Reconciliation with Alertmanager, the decisions: pure functions over data (no I/O, no clock).

A resolve that Alertmanager gave up delivering (alertd down past its retries)
would leave an incident open for ever. Alertmanager's ``GET /api/v2/alerts``
lists what it still holds; an alert alertd holds as firing that no configured
Alertmanager has any more is resolved, marked so in the timeline. When any
Alertmanager could not be asked, or has just started (its alerts are in memory:
Prometheus re-sends them within a minute or so), nothing is decided that round.

The other way round, an alert Alertmanager holds may never be sent: its DedupStage sends no notification for
a group whose alerts all fired and resolved between two flushes (notify/notify.go: "no need to notify the
receiver since it doesn't know about them"), so an alert shorter than ``group_interval`` that fires just after
a flush is lost. Every round therefore also takes in the alerts an Alertmanager lists as ``active`` (neither
silenced nor inhibited: those it would not send either) for one of alertd's receivers, firing for at least
``held_after`` (a new group's own first notification comes first), that alertd holds no member of:
``to_take`` gives them; they enter with model.HELD_BY as their receiver.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable

from alertd.core.json_types import JSONArray, JSONObject, member
from alertd.core.model import FIRING, RECONCILED_BY, RESOLVED, Alert, Incident, iso, parse_iso

ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class Held:
    """A member alertd holds as firing."""

    incident_id: str
    fingerprint: str
    labels: dict[str, str]
    starts_at: datetime


@dataclass(frozen=True, slots=True)
class Answer:
    """One Alertmanager's answer: the fingerprints it holds, since when it runs (None: unknown), and the alerts
    it would send to alertd's receivers (state ``active``: neither silenced nor inhibited), as listed."""

    fingerprints: frozenset[str]
    started_at: datetime | None = None
    active: tuple[JSONObject, ...] = ()


def held_firing(incidents: Iterable[Incident]) -> list[Held]:
    return [Held(inc.id, m.fingerprint, dict(m.labels), m.starts_at)
            for inc in incidents for m in inc.members.values() if m.status == FIRING]


def stale(held: list[Held], answers: list[Answer | None], now: datetime, min_uptime: timedelta) -> list[Held]:
    """The held alerts no Alertmanager has any more; [] unless every Alertmanager answered and is settled."""
    if not answers or any(a is None for a in answers):
        return []
    for a in answers:
        assert a is not None
        if a.started_at is not None and now - a.started_at < min_uptime:
            return []
    known = frozenset().union(*(a.fingerprints for a in answers if a is not None))
    return [h for h in held if h.fingerprint not in known]


def resolutions(gone: list[Held], now: datetime) -> list[Alert]:
    """The resolved alerts that close them: same fingerprint and startsAt as the firing ones (so a late
    real resolve from Alertmanager is a duplicate), marked as coming from reconciliation."""
    return [Alert(fingerprint=h.fingerprint, status=RESOLVED, labels=h.labels, annotations={}, starts_at=h.starts_at,
                  ends_at=now, receiver=RECONCILED_BY, received_at=now) for h in gone]


def answer_from(alerts: object, status: object, receivers: frozenset[str] = frozenset()) -> Answer:
    """``GET /api/v2/alerts`` and ``GET /api/v2/status`` bodies -> Answer; ``receivers``: alertd's receivers in
    Alertmanager's configuration (those of ``active`` alerts)."""
    if not isinstance(alerts, list):
        raise ValueError(f"GET /api/v2/alerts did not answer a list: {str(alerts)[:200]}")
    fingerprints = frozenset(str(a.get("fingerprint", "")).lower() for a in alerts if isinstance(a, dict))
    started = None
    if isinstance(status, dict) and status.get("uptime"):
        try:
            started = parse_iso(status["uptime"])
        except ValueError:
            started = None
    active = tuple(a for a in alerts if isinstance(a, dict) and member(a, "status").get("state") == "active"
                   and any(isinstance(r, dict) and r.get("name") in receivers for r in _list(a.get("receivers"))))
    return Answer(fingerprints, started, active)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def to_take(answers: list[Answer | None], incidents: Iterable[Incident], now: datetime, held_after: timedelta,
          heartbeats: tuple[str, ...] = ()) -> list[JSONObject]:
    """The alerts to take from Alertmanager's API: active for one of alertd's receivers in any Alertmanager that
    answered (once each), firing since ``held_after`` at least, no heartbeat (Watchdog: it must come by webhook
    to show that webhooks come), and not held by alertd: no member has their fingerprint with this start or a
    later one (a member resolved stays resolved: nothing is brought back). Alerts alertd took before and whose
    incident has closed are dropped by the inbox as redeliveries."""
    known: dict[str, datetime] = {}
    for inc in incidents:
        for m in inc.members.values():
            if m.fingerprint not in known or m.starts_at > known[m.fingerprint]:
                known[m.fingerprint] = m.starts_at
    out: list[JSONObject] = []
    seen: set[str] = set()
    for answer in answers:
        for a in answer.active if answer is not None else ():
            fp = str(a.get("fingerprint", "")).lower()
            try:
                starts = parse_iso(str(a.get("startsAt", "")))
            except ValueError:
                continue
            if not fp or fp in seen or starts is None or now - starts < held_after \
                    or member(a, "labels").get("alertname") in heartbeats:
                continue
            seen.add(fp)
            if fp in known and known[fp] >= starts:
                continue
            out.append(a)
    return out


def group_filter(group_labels: dict[str, str]) -> list[tuple[str, str]]:
    """Query parameters selecting one notification group: ``filter=name="value"`` per group label."""
    return [("filter", f'{name}="{_escape(value)}"') for name, value in sorted(group_labels.items())]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def as_webhook(alerts: JSONArray | list[JSONObject], receiver: str, external_url: str = "") -> JSONObject:
    """API v2 alerts (active ones) -> a webhook v4 document, so they take the receiver's own path."""
    items: JSONArray = [{
        "status": FIRING,
        "labels": a.get("labels") or {},
        "annotations": a.get("annotations") or {},
        "startsAt": a.get("startsAt") or iso(datetime.fromtimestamp(0).astimezone()),
        "endsAt": ZERO_TIME,
        "generatorURL": a.get("generatorURL", ""),
        "fingerprint": a.get("fingerprint", ""),
    } for a in alerts if isinstance(a, dict) and member(a, "status").get("state", "active") == "active"]
    return {"version": "4", "status": FIRING, "receiver": receiver, "groupKey": "", "truncatedAlerts": 0,
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": external_url,
            "alerts": items}
