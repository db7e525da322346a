"""The weekly digest: the last week's figures in one Slack message, linking to the report page.

Posted once per week across restarts and replicas: the week is claimed in the store first
(store.claim_digest: one INSERT that only one caller wins; a claim left unfinished for an hour by a
process that died may be taken over), then posted, then marked done.
"""
from __future__ import annotations

from datetime import datetime, time, timedelta, timezone
from typing import Annotated, Awaitable, Callable, Protocol
from urllib.parse import urlencode

from msgspec import Meta

from alertd.core.instants import WEEKDAYS
from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, written
from alertd.report.shapes import as_report
from alertd.core.words import counted

STALE_CLAIM = timedelta(hours=1)


class Weekday(int):
    """A day of the week, 0 for Monday, written in the file by its name."""

    @classmethod
    def from_config(cls, name: str) -> "Weekday":
        return cls(WEEKDAYS.index(name))

    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"enum": list(WEEKDAYS)}


class DigestSettings(Section, frozen=True):
    """A weekly Slack message with last week's figures and a link to the report page (needs notify.slack)."""

    channel: Annotated[str, Meta(min_length=1, description="Slack channel (#name or ID); empty: no digest.")]
    weekday: Annotated[Weekday, Meta(description="The posting day.")] = written(Weekday.from_config, "monday")
    hour: Annotated[int, Meta(ge=0, le=23, description="Hour (UTC) of the posting day.")] = 9


def due_week(s: DigestSettings, now: datetime) -> tuple[str, datetime, datetime]:
    """(period key, since, until) of the latest digest due by ``now``: the 7 days before its posting day.
    Before this week's posting time that is last week's (a process that was down then posts it late)."""
    monday = datetime.combine((now - timedelta(days=now.weekday())).date(), time(0), tzinfo=timezone.utc)
    post_at = monday + timedelta(days=s.weekday, hours=s.hour)
    if now < post_at:
        post_at -= timedelta(days=7)
    until = datetime.combine(post_at.date(), time(0), tzinfo=timezone.utc)
    return "digest-" + until.date().isoformat(), until - timedelta(days=7), until


def page_url(base: str, since: datetime, until: datetime) -> str:
    query = urlencode({"since": since.date().isoformat(), "until": until.date().isoformat()})
    return f"{base.rstrip('/')}/ui/reports/reliability?{query}" if base else ""


def text(doc: JSONObject, url: str) -> str:
    """The digest of a report (``doc``: alertd.report.build.reliability's)."""
    r = as_report(doc)
    rate = r["failuresPer1000GpuDays"]
    m = r["mttrSeconds"]
    causes = ", ".join(f"{c['category']}{' Xid ' + str(c['xid']) if c.get('xid') else ''}: {c['failures']}"
                       for c in r["byCause"][:4]) or "none"
    lines = [
        f"*GPU fleet reliability, {r['since'][:10]} to {r['until'][:10]}*",
        f"{r['failures']} hardware failures in {r['gpuDays']:,.0f} GPU-days"
        + (f" = {rate:.2f} per 1,000 GPU-days (Llama 3 405B: 0.47)" if rate is not None else ""),
        f"Causes: {causes}",
        f"Time to repair: median {_hours(m['median'])}, p90 {_hours(m['p90'])}",
        f"{r['gpuHoursOutOfService']:,.0f} GPU-hours out of service; {r['jobsInterrupted']} jobs interrupted, "
        f"≈ {r['gpuHoursLost']:,.0f} GPU-hours of work lost",
        f"Lemons: {counted(len(r['lemons']['nodes']), 'node')}, {counted(len(r['lemons']['gpus']), 'GPU')}; cordoned now: "
        + (", ".join(f"{t} {n}" for t, n in sorted(r['cordoned']['now'].items())) or "none"),
    ]
    return "\n".join(lines + ([f"<{url}|The report>"] if url else []))


def _hours(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds / 3600:.1f} h"


class DigestStore(Protocol):
    """Who posts a week's digest: the first replica to claim it (a stale claim is taken over)."""

    async def claim_digest(self, period: str, holder: str, now: datetime, stale_before: datetime) -> bool: ...

    async def finish_digest(self, period: str, now: datetime) -> None: ...


async def post_if_due(store: DigestStore, s: DigestSettings, now: datetime, holder: str,
                      report: Callable[[datetime, datetime], Awaitable[JSONObject]],
                      post: Callable[[str, str], Awaitable[None]], base_url: str = "") -> bool:
    """Post this week's digest if its time has come and nobody has; True when this call posted it."""
    if not s.channel:
        return False
    key, since, until = due_week(s, now)
    if not await store.claim_digest(key, holder, now, now - STALE_CLAIM):
        return False
    await post(s.channel, text(await report(since, until), page_url(base_url, since, until)))
    await store.finish_digest(key, now)
    return True


__all__ = ["DigestSettings", "DigestStore", "due_week", "page_url", "post_if_due", "text"]
