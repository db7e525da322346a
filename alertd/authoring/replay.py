"""``alertd replay FILE``: recorded webhooks through the engine on a virtual clock.

The input is JSON lines, one accepted webhook per line:
``{"received_at": "<RFC 3339>", "body": <Alertmanager webhook>}`` — what
``alertd serve --record FILE`` writes. Every webhook is ingested at its arrival
time, time-based rules run in between, and the router decides what would be
sent. Nothing is sent and nothing is stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TextIO

import msgspec

from alertd.config.settings import Config
from alertd.core.durations import DurationError, parse_duration
from alertd.core.errors import InvalidDocument, Problem
from alertd.core.json_types import JSONObject
from alertd.core.model import iso, parse_iso
from alertd.core.outbox_items import encode_payload
from alertd.engine.normalize import NormalizeConfig
from alertd.notify.router import ConsoleRouter, Router
from alertd.receive.payload import BadPayload, Notification, parse_notification, read_notification
from alertd.rules.ruleset import RuleSet

from alertd.authoring.virtual import VirtualRun, build_router
from alertd.core.words import counted


@dataclass(slots=True)
class Recording:
    webhooks: list[tuple[datetime, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def read_recording(path: str | Path) -> Recording:
    """JSON lines of {received_at, body} (``serve --record``), or a plain Alertmanager webhook (one JSON
    document, as ``explain`` takes it), replayed as received when its newest alert started."""
    text = Path(path).read_text(encoding="utf-8")
    whole = _whole_webhook(text)
    if whole is not None:
        return Recording([whole])
    rec = Recording()
    source = str(path)
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            received = parse_iso(entry["received_at"])
            body = entry["body"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            rec.problems.append(Problem(source, f"not a recorded webhook ({type(exc).__name__}: {exc}); skipped", n, 1))
            continue
        if received is None:
            rec.problems.append(Problem(source, "received_at is empty; skipped", n, 1))
            continue
        rec.webhooks.append((received, body))
    if not rec.webhooks and len(rec.problems) > 1:  # not a recording at all: one message, not one per line
        rec.problems = [Problem(source, "neither a recording (JSON lines of {received_at, body}, from serve --record) "
                                f"nor an Alertmanager webhook; first problem: {rec.problems[0].message}", 1, 1)]
    return rec


def _whole_webhook(text: str) -> tuple[datetime, Any] | None:
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("alerts"), list):
        return None
    starts = []
    for alert in body["alerts"]:
        try:
            starts.append(parse_iso(alert.get("startsAt")) if isinstance(alert, dict) else None)
        except (TypeError, ValueError):
            continue  # the payload's own check reports it when the webhook is replayed
    known = [t for t in starts if t is not None]
    return (max(known) if known else datetime.now(timezone.utc)), body


@dataclass(slots=True)
class ReplayResult:
    run: VirtualRun
    webhooks: int = 0
    rejected: list[Problem] = field(default_factory=list)
    first: datetime | None = None
    last: datetime | None = None
    end: datetime | None = None


def replay(rec: Recording, rules: RuleSet, *, router: ConsoleRouter | Router | None = None, tail: timedelta | None = None,
           until: datetime | None = None, source: str = "<recording>", ncfg: NormalizeConfig | None = None) -> ReplayResult:
    """Feed the recording through the engine; afterwards run the clock on for ``tail`` (default: the hold-down).

    ``router`` defaults to the routing section's router with every notifier available (see virtual.build_router).
    """
    ordered = sorted(enumerate(rec.webhooks), key=lambda e: (e[1][0], e[0]))  # stable by arrival time
    start = ordered[0][1][0] if ordered else datetime.now().astimezone()
    run = VirtualRun(rules, start, router=router if router is not None else build_router(rules), ncfg=ncfg)
    res = ReplayResult(run, first=ordered[0][1][0] if ordered else None)
    for index, (received, body) in ordered:
        if until is not None and received > until:
            break
        try:
            note = _notification(body, received)
        except BadPayload as exc:
            res.rejected.append(Problem(source, f"webhook {index + 1} would be rejected with 400: {exc}"))
            continue
        res.webhooks += 1
        res.last = received
        run.receive(note.alerts, received)
    end = until or ((res.last or start) + (tail if tail is not None else rules.correlation.hold_down + timedelta(seconds=1)))
    run.advance(end)
    res.end = end
    return res


def _notification(body: Any, received: datetime) -> Notification:
    """The body as the receiver reads it: encoded, then msgspec's one-pass check (the JSON Schema explains a refusal).

    Validating a month of webhooks with jsonschema alone took most of a replay's time.
    """
    try:
        raw = msgspec.json.encode(body)
    except (TypeError, msgspec.EncodeError):
        return parse_notification(body, received)
    return read_notification(raw, received)


# ----- output -----


def _short(ts: datetime | None) -> str:
    if ts is None:
        return "-"
    text = ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{ts.microsecond // 1000:03d}" if ts.microsecond else "    ")


def as_json(res: ReplayResult) -> JSONObject:
    run = res.run
    return {
        "summary": {
            "webhooks": res.webhooks,
            "alerts": run.received,
            "duplicates": run.duplicates,
            "rejected": len(res.rejected),
            "first": iso(res.first),
            "last": iso(res.last),
            "end": iso(res.end),
            "incidents": len(run.incidents),
            "open": len(run.open_incidents()),
            "notifications": len(run.sent),
        },
        "incidents": [inc.to_dict() for inc in run.incidents.values()],
        "notifications": [
            {"at": iso(s.at), "due": iso(s.item.due_at), "incident": s.item.incident_id, "target": s.item.target,
             "kind": str(s.item.intent), "change": list(s.item.payload.kinds), "sent": not fate, "skipped": fate,
             "payload": encode_payload(s.item.payload)}
            for s, fate in run.outcomes()
        ],
        "rejected": [str(p) for p in res.rejected],
    }


def print_text(res: ReplayResult, out: TextIO) -> None:
    run = res.run
    print(f"replayed {counted(res.webhooks, 'webhook')} ({counted(run.received, 'alert')}, {run.duplicates} redelivered) "
          f"from {_short(res.first).strip()} to {_short(res.last).strip()} UTC; clock stopped at {_short(res.end).strip()}",
          file=out)
    for p in res.rejected:
        print(f"  {p}", file=out)
    print(f"\nincidents ({len(run.incidents)}, {len(run.open_incidents())} open at the end):", file=out)
    for inc in run.incidents.values():
        print(f"  {inc.id}  {inc.status:<12} {inc.severity:<8} {inc.title}", file=out)
        extra = f"  xids {','.join(map(str, inc.xids))}" if inc.xids else ""
        print(f"      key {inc.key}  group {inc.group}  signals {','.join(inc.signals)}{extra}", file=out)
        links = "".join(f"  {k} {v}" for k, v in (("previous", inc.previous_id), ("fleet", inc.parent_id)) if v)
        print(f"      opened {_short(inc.opened_at)}  resolved {_short(inc.resolved_at)}  members {len(inc.members)}"
              f"  flaps {inc.flaps}{links}", file=out)
        if inc.primary and inc.primary.action:
            print(f"      action {inc.primary.action}  runbook {inc.primary.runbook}", file=out)
        for ev in inc.timeline:
            print(f"        {_short(ev.at)}  {ev.kind:<22} {ev.text}", file=out)
    outcomes = run.outcomes()
    print(f"\nnotifications ({sum(1 for _, fate in outcomes if not fate)} would be sent, "
          f"{sum(1 for _, fate in outcomes if fate)} skipped):", file=out)
    width = max((len(s.item.target) for s, _ in outcomes), default=0)
    for s, fate in outcomes:
        kinds = ",".join(s.item.payload.kinds)
        notes = [f"queued {_short(s.at).strip()}"] if s.item.due_at != s.at else []
        notes += [fate] if fate else []
        tail = f"  ({'; '.join(notes)})" if notes else ""
        print(f"  {_short(s.item.due_at)}  {s.item.incident_id:<8} {s.item.target:<{width}}  {str(s.item.intent):<8} {kinds}{tail}",
              file=out)


def main(path: str, *, rule_paths: list[str] | None, config: str | None, as_json_output: bool,
         tail: str | None, until: str | None, out: TextIO, err: TextIO) -> int:
    from alertd.config.settings import load_config
    from alertd.rules.shipped import default_rule_paths

    from alertd.authoring.virtual import load_rule_set
    from alertd.app.recording_rules import with_site_recordings

    try:
        cfg = load_config(config) if config else Config()
        rules = with_site_recordings(load_rule_set(rule_paths or (cfg.rule_paths if config else default_rule_paths())),
                                     cfg)  # the site's recording rules (classify.prometheus_rules)
    except InvalidDocument as exc:
        print(f"invalid {'configuration or ' if config else ''}rules:\n{exc}", file=err)
        return 1
    try:
        rec = read_recording(path)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"cannot read {path}: {exc}", file=err)
        return 1
    for p in rec.problems:
        print(str(p), file=err)
    if not rec.webhooks:
        print(f"{path}: no webhook to replay", file=err)
        return 1
    try:
        tail_d = parse_duration(tail) if tail else None
        until_t = parse_iso(until) if until else None
    except (DurationError, ValueError) as exc:
        print(f"bad --tail or --until: {exc}", file=err)
        return 2
    res = replay(rec, rules, router=build_router(rules, cfg if config else None), tail=tail_d, until=until_t, source=path,
                 ncfg=cfg.normalize)
    if as_json_output:
        json.dump(as_json(res), out, indent=2, default=str)
        out.write("\n")
    else:
        print_text(res, out)
    return 0
