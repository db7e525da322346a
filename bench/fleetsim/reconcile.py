"""alertd's reconciliation against the emulated Alertmanager's API, on simulated time.

Alertmanager's API (``GET /api/v2/alerts``) lists an alert from the moment
Prometheus sent it until its ``endsAt`` (the resolving evaluation), whatever
its group's notifications did: an alert that fired and resolved between two
flushes of its group is listed there although no webhook ever carried it
(alertmanager.py: the DedupStage). alertd's engine leader asks every
``alertmanager.reconcile_interval`` and takes in the active alerts for its
receiver that fired at least ``reconcile_held_after`` ago and that it holds
no member of, once each (alertd/alertmanager/reconcile.py, reconcile_loop.py).

Here each alert is offered at the first poll that finds it old enough, through
alertd's own decision (``answer_from``, ``to_take``) and webhook form
(``as_webhook``, receiver ``alertd:alertmanager-api``). The replay stands in
for the engine's members: an alert a webhook already carried is dropped there
as a redelivery (same fingerprint, startsAt and status).

The same rounds resolve what alertd holds as firing and Alertmanager no longer
lists (``resolutions``, receiver ``alertd:reconciliation``): an alert taken from
the API whose resolve no flush sends, or any alert whose resolve the next poll
sees before its group's next flush. The replay drops the later copy of either.
"""
from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import orjson

from alertd.alertmanager.reconcile import Held, answer_from, as_webhook, resolutions, to_take
from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.core.model import HELD_BY, RECONCILED_BY
from alertd.receive.payload import encode_webhook

from bench.fleetsim.alertmanager import Flush, RouteConfig, rfc3339
from bench.fleetsim.prometheus import SEND_LATENCY, Instance

DEFAULTS = AlertmanagerSettings()


def api_alert(inst: Instance, route: RouteConfig, start: datetime) -> dict[str, Any]:
    """One alert as ``GET /api/v2/alerts`` lists it while active (api/v2 gettableAlert)."""
    return {
        "labels": inst.labels, "annotations": inst.annotations, "fingerprint": inst.fingerprint,
        "startsAt": rfc3339(start, inst.starts_at),
        "endsAt": rfc3339(start, inst.resolved_at if inst.resolved_at is not None else inst.starts_at + 240.0),
        "updatedAt": rfc3339(start, inst.starts_at + SEND_LATENCY), "generatorURL": inst.rule.generator_url,
        "receivers": [{"name": route.receiver}], "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
    }


def first_poll(inst: Instance, interval: float, offset: float, held_after: float) -> float | None:
    """The first poll at which the API lists the alert and it has fired ``held_after`` at least; None when it
    resolves before one."""
    ready = max(inst.starts_at + SEND_LATENCY, inst.starts_at + held_after)
    at = offset + math.ceil((ready - offset) / interval - 1e-9) * interval
    if inst.resolved_at is not None and at >= inst.resolved_at:
        return None
    return at


def reconcile_webhooks(instances: list[Instance], flushes: list[Flush], route: RouteConfig, start: datetime,
                       horizon: float, *, interval: float = DEFAULTS.reconcile_interval.total_seconds(), offset: float = 0.0,
                       held_after: float = DEFAULTS.reconcile_held_after.total_seconds()) -> list[tuple[float, dict[str, Any]]]:
    """(poll time, webhook) for every poll that takes something in or resolves something."""
    polls: dict[float, list[Instance]] = defaultdict(list)
    taken_at: dict[int, float] = {}
    for inst in instances:
        at = first_poll(inst, interval, offset, held_after)
        if at is not None and at <= horizon:
            polls[at].append(inst)
            taken_at[id(inst)] = at
    out = []
    receivers = frozenset({route.receiver})
    for at in sorted(polls):
        answer = answer_from([api_alert(i, route, start) for i in polls[at]], {}, receivers)
        now = start + timedelta(seconds=at)
        taken = to_take([answer], (), now, timedelta(seconds=held_after))
        if taken:
            out.append((at, as_webhook(taken, HELD_BY, route.external_url)))
    gone = _gone(instances, flushes, taken_at, start, interval, offset)
    for at in sorted(gone):
        if at <= horizon:
            now = start + timedelta(seconds=at)
            body = encode_webhook([a.to_wire() for a in resolutions(gone[at], now)], RECONCILED_BY)
            out.append((at, orjson.loads(body)))
    return sorted(out, key=lambda x: x[0])


def _gone(instances: list[Instance], flushes: list[Flush], taken_at: dict[int, float], start: datetime,
          interval: float, offset: float) -> dict[float, list[Held]]:
    """Poll time -> the alerts reconciliation resolves then: held firing by alertd (a webhook or a poll brought
    it), no longer listed (resolved, and no later spell of the same series active), and no flush sent its
    resolve before."""
    firing: dict[tuple[str, str], float] = {}
    resolved: dict[tuple[str, str], float] = {}
    for f in flushes:
        for a in f.body["alerts"]:
            seen = firing if a["status"] == "firing" else resolved
            seen.setdefault((a["fingerprint"], a["startsAt"]), f.at)
    spells: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for inst in instances:
        spells[inst.fingerprint].append((inst.starts_at, inst.resolved_at if inst.resolved_at is not None else math.inf))
    out: dict[float, list[Held]] = defaultdict(list)
    for inst in instances:
        key = (inst.fingerprint, rfc3339(start, inst.starts_at))
        held = min(firing.get(key, math.inf), taken_at.get(id(inst), math.inf))
        if inst.resolved_at is None or held == math.inf:
            continue
        at = offset + (math.floor((max(inst.resolved_at, held) - offset) / interval) + 1) * interval
        if at >= resolved.get(key, math.inf) or any(s <= at < e for s, e in spells[inst.fingerprint]):
            continue
        out[at].append(Held("", inst.fingerprint, inst.labels, start + timedelta(seconds=inst.starts_at)))
    return out
