"""The listener's edge, before any handler: which Host, which origin, which body a request may bring.

A browser is a client that acts for whoever visits a page in it: a page on any site
can make it POST a form or a ``text/plain`` body to ``http://127.0.0.1:9095`` (no
preflight), and a site that rebinds its DNS name to 127.0.0.1 can even read the
answers. Where alertd grants something without credentials (the loopback default,
where every caller is admin; an open receiver) or on a credential the browser adds
by itself (the session cookie, basic auth), that would let any page act. So:

- **Host** (DNS rebinding): while the API or the receiver has no credentials, a
  request must name alertd by a loopback name or address, the listen address, the
  host of ``external_url`` or one of ``api.allowed_hosts``; any other gets 421.
- **Origin**: a state-changing request (not GET/HEAD/OPTIONS) that a browser marks
  as coming from another origin (``Origin``, or ``Sec-Fetch-Site`` other than
  ``same-origin``/``none``) gets 403. Programs (Alertmanager, curl, the CLI, Slack)
  send neither header.
- **Content-Type**: JSON routes refuse the bodies a page can send without a CORS
  preflight (``text/plain``, form, multipart) with 415; form routes take only
  urlencoded forms.
- **Body size**: every route but the webhook takes a small body (``SMALL_BODY``);
  a larger ``Content-Length`` is answered 413 before a byte of it is read.
- **Forwarded scheme**: ``X-Forwarded-Proto`` is believed only from
  ``api.trusted_proxies``, so the session cookie is ``Secure`` behind a
  TLS-terminating proxy and a client cannot claim HTTPS by itself.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from aiohttp import web

from alertd.config.credentials import Network
from alertd.config.settings import Config
from alertd.web.auth import AUTH, Authenticator

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

WEBHOOK = "/api/v1/alerts/alertmanager"
CLOUDEVENTS = "/api/v1/events/cloudevents"  # CloudEvents' HTTP binding (alertd/web/cloudevents.py)
SLACK = "/api/v1/slack/actions"
SMALL_BODY = 64 * 1024  # login, UI actions, API writes: a few hundred bytes at most
SLACK_BODY = 1024 * 1024  # an interactive payload carries the whole message it came from
FORM_ROUTES = frozenset({"/ui/login", "/ui/logout", "/ui/incidents/{id}/action", SLACK})
FORM = "application/x-www-form-urlencoded"
# What a page on another site can send without a CORS preflight (fetch's "CORS-safelisted" types).
SIMPLE_TYPES = frozenset({"text/plain", FORM, "multipart/form-data"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOCAL_NAMES = ("localhost", "localhost.localdomain")


@dataclass(frozen=True, slots=True)
class EdgePolicy:
    """What the edge accepts; built once from the configuration (``EdgePolicy.from_config``)."""

    hosts: frozenset[str] = frozenset()  # lowercase names accepted besides loopback ones
    any_address: bool = False  # listening on 0.0.0.0 / ::: an address literal cannot be rebound, accept any
    proxies: tuple[Network, ...] = ()
    origins: frozenset[str] = frozenset()  # netlocs accepted as Origin besides the request's own Host
    webhook_limit: int = 10 * 1024 * 1024

    @classmethod
    def from_config(cls, cfg: Config) -> "EdgePolicy":
        external = urlsplit(cfg.external_url) if cfg.external_url else None
        hosts = {h.lower() for h in cfg.api.allowed_hosts}
        listen = cfg.host_port[0].lower()
        hosts.add(listen)
        origins = set()
        if external is not None and external.hostname:
            hosts.add(external.hostname.lower())
            origins.add(_netloc(external.hostname, external.port))
        return cls(frozenset(hosts), listen in ("", "0.0.0.0", "::"), cfg.trusted_proxies,
                   frozenset(origins), cfg.max_body_bytes)

    def trusts(self, peer: str | None) -> bool:
        address = _address(peer or "")
        return address is not None and any(address in net for net in self.proxies)

    def host_allowed(self, host: str) -> bool:
        name = _hostname(host)
        if not name or name in LOCAL_NAMES or name.endswith(".localhost") or name in self.hosts:
            return True
        address = _address(name)
        return address is not None and (address.is_loopback or self.any_address)

    def same_origin(self, origin: str, request: web.Request) -> bool:
        """``Origin`` names this server: the Host it was asked by, or ``external_url``'s."""
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null" (sandboxed frames, file:, some redirects) is no origin of ours
        netloc = _netloc(parts.hostname, port)
        return netloc in self.origins or netloc == _host_netloc(request.headers.get("Host", ""))

    def body_limit(self, route: str) -> int | None:
        """Bytes a route's body may have; None for the webhook, whose handler counts its own refusals."""
        if route in (WEBHOOK, CLOUDEVENTS):
            return None
        return SLACK_BODY if route == SLACK else SMALL_BODY


EDGE = web.AppKey("edge", EdgePolicy)


def client_from(policy: "EdgePolicy", peer: str, headers: Mapping[str, str]) -> str:
    """Who is asking, for throttling: the TCP peer, or behind a trusted proxy the last address it forwarded.
    From a request's parts: the webhook lane has no web.Request, and asks for every webhook (no proxy trusted:
    no address parsed)."""
    if not policy.proxies or not policy.trusts(peer):
        return peer
    hops = [h.strip() for h in headers.get("X-Forwarded-For", "").split(",") if h.strip()]
    while hops and policy.trusts(hops[-1]):
        hops.pop()
    return hops[-1] if hops else peer


def cross_site(request: web.Request) -> str:
    """Why a browser says this request comes from another site, or ""."""
    site = request.headers.get("Sec-Fetch-Site", "")
    if site and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site: {site[:40]}"
    origin = request.headers.get("Origin")
    if origin is not None and not request.app[EDGE].same_origin(origin, request):
        return f"Origin {origin[:100]}"
    return ""


def fetched_same_origin(request: web.Request) -> bool:
    """The browser says this request comes from alertd's own pages (or the user typed the address)."""
    if request.headers.get("Sec-Fetch-Site", "") in ("same-origin", "none"):
        return "Origin" not in request.headers or not cross_site(request)
    origin = request.headers.get("Origin")
    return origin is not None and request.app[EDGE].same_origin(origin, request)


def checks_host(auth: Authenticator) -> bool:
    """Whether the edge checks Host: while the API or the receiver takes requests without credentials."""
    return not (auth.api.enabled and auth.receiver.enabled)


def _refuse(status: int, message: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"error": message}), content_type="application/json",
                        headers=headers)


def _refusal(request: web.Request) -> web.Response | None:
    policy, auth = request.app[EDGE], request.app[AUTH]
    if checks_host(auth) and not policy.host_allowed(request.headers.get("Host", "")):
        return _refuse(421, f"alertd does not answer to the host name {request.headers.get('Host', '')[:100]!r}: add it "
                            "to api.allowed_hosts or external_url, or use 127.0.0.1")
    if request.method in SAFE_METHODS:
        return None
    if why := cross_site(request):
        return _refuse(403, f"cross-site request refused ({why})")
    route = route_of(request)
    limit = policy.body_limit(route)
    if limit is not None and request.content_length is not None and request.content_length > limit:
        return _refuse(413, f"body of {request.content_length} bytes exceeds the limit of {limit} for this route",
                       Connection="close")
    if request.body_exists:
        kind = request.content_type.lower()
        if route in FORM_ROUTES and kind != FORM:
            return _refuse(415, f"this route takes {FORM}, not {kind or 'no Content-Type'}")
        if route not in FORM_ROUTES and kind in SIMPLE_TYPES:
            return _refuse(415, f"this route takes application/json, not {kind}")
    return None


@web.middleware
async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
    proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    if proto in ("http", "https") and proto != request.scheme and request.app[EDGE].trusts(request.remote):
        request = request.clone(scheme=proto)
    if (refused := _refusal(request)) is not None:
        return refused
    try:
        response = await handler(request)
    except web.HTTPTooManyRequests:
        # A throttled client's wrong credentials were still compared (a right one is always taken): its 429s
        # leave one at a time, so more connections do not make a guesser learn faster.
        auth = request.app[AUTH]
        wait = auth.answer_slot(auth.client_of(request))
        if wait is None and request.transport is not None:  # ten answers queued: this one learns nothing
            request.transport.close()
        await asyncio.sleep(wait or 0.0)
        raise
    if request.path.startswith("/ui"):  # no page of alertd's in another site's frame (clickjacking the buttons)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
    return response


def route_of(request: web.Request) -> str:
    """The route's pattern ("/ui/incidents/{id}/action"), or the path when none matched."""
    info = request.match_info.route.resource
    return info.canonical if info is not None else request.path


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _hostname(host: str) -> str:
    """The name in a Host header, lowercase, without the port ("[::1]:9095" -> "::1")."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _netloc(hostname: str, port: int | None) -> str:
    name = hostname.lower()
    name = f"[{name}]" if ":" in name else name
    return name if port in (None, 80, 443) else f"{name}:{port}"


def _host_netloc(host: str) -> str:
    try:
        parts = urlsplit("//" + host.strip())
        return _netloc(parts.hostname or "", parts.port)
    except ValueError:
        return ""


__all__ = ["EDGE", "EdgePolicy", "checks_host", "client_from", "cross_site", "edge", "fetched_same_origin"]
