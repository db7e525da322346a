"""The browser's way in: a token login that opens a server-side session, on top of alertd.web.auth.

Who may do what is alertd.web.auth's model (named tokens with roles, the trusted
proxy header, basic auth); this module only adds the session cookie as one more
identifier (``Authenticator.add_identifier``). Behind a trusted proxy the proxy
header identifies the user on every request and no login is needed.

The cookie is a random id (32 bytes) and reveals nothing about the token. The
session lives in the store (alertd/store/sessions.py): every receiver process and
replica sees it, logout deletes it (a replayed cookie is refused), and it names
the token that opened it by a slow fingerprint, so once that token is removed or
rotated away (SIGHUP, ``POST /-/reload``) its sessions are refused. The cookie is
HttpOnly and SameSite=Strict, ``Secure`` over HTTPS (also behind a trusted TLS
proxy, alertd.web.guard), and on the API it counts only for a request the browser
says comes from alertd's own pages (``fetched_same_origin``).
"""
from __future__ import annotations

import hashlib
import secrets
import time
from typing import Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from alertd.store.base import StoreUnavailable
from alertd.config.credentials import Principal, Role
from alertd.web.auth import AUTH, Authenticator, token_fingerprint
from alertd.web.guard import Handler, fetched_same_origin
from alertd.web.keys import SERVICE

COOKIE = "alertd_session"
SESSION_MAX_AGE = 12 * 3600
PRINCIPAL = web.RequestKey("principal", Principal)  # set by the API and UI guards
SESSION = web.RequestKey("session", Principal)  # the session cookie's principal, found by ``sessions``
LINK = web.RequestKey("link", Principal)  # a signed incident link's reader (alertd/web/ui.py, ``opens_signed``)
LINK_READER = Principal("signed link", Role.READ, "link")
API_PATHS = ("/api/", "/-/")
NO_SESSION = ("/ui/static/", "/healthz", "/readyz", "/metrics")  # open anyway: no store read for their cookie


def session_key(session_id: str) -> str:
    """What the store keeps of a session id: its hash (a copy of the table opens no session)."""
    return hashlib.sha256(b"alertd-session|" + session_id.encode(errors="replace")).hexdigest()


def _principal(auth: Authenticator, name: str, fingerprint: str) -> Principal | None:
    """The session's token must still be configured (rotation ends its sessions); its role is today's."""
    for tok in auth.api.tokens:
        if tok.name == name and secrets.compare_digest(token_fingerprint(tok.secret), fingerprint):
            return Principal(tok.name, tok.role, "session")
    return None


def session_middleware(clock: Callable[[], float] = time.time) -> Middleware:
    @web.middleware
    async def sessions(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Look the cookie's session up (the store is async; identifiers are not) before the handler runs."""
        raw = request.cookies.get(COOKIE, "")
        auth = request.app[AUTH]
        api = request.path.startswith(API_PATHS)
        if raw and auth.api.enabled and "Authorization" not in request.headers and (
                not api or fetched_same_origin(request)) and not request.path.startswith(NO_SESSION):
            try:
                found = await request.app[SERVICE].store.find_session(session_key(raw), clock())
            except StoreUnavailable:
                return web.json_response({"error": "sessions cannot be checked now; retry later"}, status=503,
                                         headers={"Retry-After": "5"})
            if found and (principal := _principal(auth, *found)) is not None:
                request[SESSION] = principal
        return await handler(request)
    return sessions


async def login(request: web.Request, token: str, response: web.StreamResponse,
                clock: Callable[[], float] = time.time) -> Principal | None:
    """Check a token typed into the login form; on success open a session and set its cookie on ``response``."""
    auth = request.app[AUTH]
    tok = auth.api.check_token(token) if token.strip() else None
    if tok is None:
        return None
    session_id = secrets.token_urlsafe(32)
    now = clock()
    await request.app[SERVICE].store.create_session(session_key(session_id), tok.name, token_fingerprint(tok.secret),
                                                    now, now + SESSION_MAX_AGE)
    response.set_cookie(COOKIE, session_id, max_age=SESSION_MAX_AGE, httponly=True, samesite="Strict",
                        secure=request.secure, path="/")
    return Principal(tok.name, tok.role, "session")


async def logout(request: web.Request, response: web.StreamResponse) -> None:
    """End the session in the store (the cookie is refused from now on, wherever replayed) and drop the cookie."""
    if raw := request.cookies.get(COOKIE, ""):
        await request.app[SERVICE].store.end_session(session_key(raw))
    response.del_cookie(COOKIE, path="/")


def identify(request: web.Request) -> Principal | None:
    return request.app[AUTH].identify(request)[0]


def same_origin(request: web.Request) -> bool:
    """A browser POST of alertd's own pages: it carries an Origin (or Sec-Fetch-Site) naming this server."""
    return fetched_same_origin(request)


def install(app: web.Application) -> None:
    """Accept the session cookie wherever the API accepts credentials (app[AUTH] must be set)."""
    app[AUTH].add_identifier(lambda request: request.get(SESSION))
    app.middlewares.append(session_middleware())
