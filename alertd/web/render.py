"""HTML rendering with Jinja2: autoescaping on, templates compiled once and cached.

Jinja2 because it is the well-kept server-side template engine of the Python
world (Pallets: Flask's), escapes by default (every template here is .html, so
autoescape is on for all; a URL from an alert goes into ``href`` only through
the ``weburl`` filter: http(s) or nothing), and compiles templates to Python
code, so a 100-row page renders in a few milliseconds; there is no JavaScript
build step anywhere.
"""
from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from alertd.core.model import parse_iso
from alertd.integrations.presentation import event_words, web_url


def when(value: Any) -> str:
    """RFC 3339 -> '2026-11-30 12:00:05 UTC' (one fixed zone: on-call people compare times across sites)."""
    if isinstance(value, str):
        return _when_text(value)
    if not isinstance(value, datetime):  # None or "": not known
        return ""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@functools.lru_cache(maxsize=8192)
def _when_text(value: str) -> str:
    """Stored timestamps repeat across a page (and pages): parse each once."""
    ts = parse_iso(value)
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else ""


@functools.lru_cache(maxsize=8192)
def urlpart(value: Any) -> str:
    return quote(str(value), safe="")


def ago(value: Any, now: datetime | None = None) -> str:
    ts = parse_iso(value) if isinstance(value, str) else value
    if not ts:
        return ""
    seconds = int(((now or datetime.now(timezone.utc)) - ts).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds // size}{unit} ago"
    return f"{max(seconds, 0)}s ago"


def slack_link(ref: str) -> str:
    """A Slack message reference ``channel|ts`` -> its permalink form."""
    channel, _, ts = (ref or "").partition("|")
    if not channel or not ts:
        return ""
    return f"https://slack.com/archives/{quote(channel)}/p{ts.replace('.', '')}"


def with_query(base: str, query: dict[str, str], **changes: Any) -> str:
    merged = {**{k: v for k, v in query.items() if v}, **{k: v for k, v in changes.items()}}
    merged = {k: v for k, v in merged.items() if v not in ("", None)}
    return base + ("?" + urlencode(merged) if merged else "")


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("alertd.web", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined, auto_reload=False)
    env.filters.update(when=when, ago=ago, slack_link=slack_link, urlpart=urlpart, weburl=web_url,
                       event_words=event_words)  # weburl: http(s) or ""
    env.globals.update(with_query=with_query)
    return env


def page(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    from alertd.web.access import PRINCIPAL

    principal = request.get(PRINCIPAL)
    body = environment().get_template(template).render(request=request, principal=principal, **context)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                                 "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                                                            "style-src 'self'; script-src 'self'; frame-ancestors 'none'"})
