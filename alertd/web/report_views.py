"""The reliability report over HTTP: ``GET /api/v1/reports/reliability`` (JSON, or CSV with ``format=csv``)
and the page ``/ui/reports/reliability`` with its charts (Chart.js, vendored in static/, no build step).

Parameters: ``since`` and ``until`` (RFC 3339, a date, or a duration meaning that long ago; default the
last 30 days), ``cluster``, ``nodeType``. Figures: docs/reliability-report.md.
"""
from __future__ import annotations

from datetime import datetime, time, timedelta, timezone
from typing import Mapping

from aiohttp import web

from alertd.config.credentials import Role
from alertd.core.durations import DurationError, parse_duration
from alertd.core.json_types import JSONObject, text
from alertd.core.model import parse_iso
from alertd.report.build import BadPeriod
from alertd.report.compute import Period
from alertd.report.table import to_csv
from alertd.web import api
from alertd.web.keys import SERVICE
from alertd.web.params import BadParam, reject_unknown
from alertd.web.render import page
from alertd.web.ui import login_required

PARAMS = ("since", "until", "cluster", "nodeType")
DEFAULT_DAYS = 30


def _when(query: Mapping[str, str], name: str, now: datetime, default: datetime) -> datetime:
    raw = query.get(name, "").strip()
    if not raw:
        return default
    if len(raw) == 10 and raw[4] == "-":  # a date: its midnight, UTC
        try:
            return datetime.combine(datetime.strptime(raw, "%Y-%m-%d").date(), time(0), tzinfo=timezone.utc)
        except ValueError:
            raise BadParam(name, f"{name}: {raw!r} is not a date (YYYY-MM-DD)") from None
    try:
        found = parse_iso(raw)
    except ValueError:
        found = None
    if found is not None:
        return found
    try:
        return now - parse_duration(raw)
    except (DurationError, OverflowError):
        raise BadParam(name, f"{name} must be a date, an RFC 3339 timestamp or a duration such as 30d") from None


def period_of(query: Mapping[str, str], now: datetime, extra: tuple[str, ...] = ()) -> Period:
    """The period asked for (raises BadParam naming the parameter that is wrong)."""
    reject_unknown(query, PARAMS + extra)
    today = datetime.combine(now.date(), time(0), tzinfo=timezone.utc) + timedelta(days=1)
    until = _when(query, "until", now, today)
    since = _when(query, "since", now, until - timedelta(days=DEFAULT_DAYS))
    return Period(since, until, query.get("cluster", "").strip(), query.get("nodeType", "").strip())


async def _report(request: web.Request, extra: tuple[str, ...] = ()) -> JSONObject:
    svc = request.app[SERVICE]
    p = period_of(request.query, svc.clock(), extra)
    try:
        return await svc.reporting.report(p)
    except BadPeriod as exc:
        raise BadParam("until", str(exc)) from None


@api.guarded(Role.READ)
async def reliability_api(request: web.Request) -> web.StreamResponse:
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadParam("format", "format must be json or csv")
    report = await _report(request, ("format",))
    if fmt == "csv":
        name = f"reliability-{text(report, 'since')[:10]}-{text(report, 'until')[:10]}.csv"
        return web.Response(text=to_csv(report), content_type="text/csv", charset="utf-8",
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})
    return api._json(report)


@login_required()
async def reliability_page(request: web.Request) -> web.Response:
    report = await _report(request)
    query = "&".join(f"{k}={v}" for k, v in request.query.items() if k in PARAMS)
    return page(request, "reliability.html", r=report, query=query,
                no_fleet_size=request.app[SERVICE].reporting.no_fleet_size if not report.get("gpuDays") else "")


def register(app: web.Application) -> None:
    app.router.add_get("/api/v1/reports/reliability", reliability_api)
    app.router.add_get("/ui/reports/reliability", reliability_page)


__all__ = ["period_of", "register"]
