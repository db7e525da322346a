"""The browser's way in: a token login that sets a session cookie, on top of alertd.web.auth.

Who may do what is alertd.web.auth's model (named tokens with roles, the trusted
proxy header, basic auth); this module only adds the session cookie as one more
identifier (``Authenticator.add_identifier``). Behind a trusted proxy the proxy
header identifies the user on every request and no login is needed.

The cookie is ``name|role|expiry`` signed with an HMAC keyed by the token the
user typed in: no server-side session store, every replica accepts it, and
removing (or rotating away) the token ends its sessions. It is HttpOnly and
SameSite=Strict, and state-changing UI requests must also come from the same
origin (``same_origin``), so a cross-site form cannot act.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Callable

from aiohttp import web

from alertd.web.auth import AUTH, Authenticator, Principal

COOKIE = "alertd_session"
SESSION_MAX_AGE = 12 * 3600
PRINCIPAL = web.RequestKey("principal", Principal)  # set by the API and UI guards


def _sign(secret: bytes, payload: str) -> str:
    return hmac.new(secret, b"alertd-ui-session|" + payload.encode(), hashlib.sha256).hexdigest()


def session_identifier(auth: Authenticator, clock: Callable[[], float] = time.time
                       ) -> Callable[[web.Request], Principal | None]:
    def identify(request: web.Request) -> Principal | None:
        raw = request.cookies.get(COOKIE, "")
        body, _, mac = raw.rpartition(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
            name, role, expires = payload.split("|")
            if float(expires) < clock():
                return None
        except (ValueError, UnicodeDecodeError):
            return None
        for tok in auth.api.tokens:  # the token that signed it must still exist, with the same name and role
            if tok.name == name and tok.role == role and hmac.compare_digest(mac, _sign(tok.secret, payload)):
                return Principal(name, role, "session")
        return None
    return identify


def login(request: web.Request, token: str, response: web.StreamResponse,
          clock: Callable[[], float] = time.time) -> Principal | None:
    """Check a token typed into the login form; on success set the session cookie on ``response``."""
    auth = request.app[AUTH]
    tok = auth.api.check_token(token) if token.strip() else None
    if tok is None:
        return None
    payload = f"{tok.name}|{tok.role}|{int(clock()) + SESSION_MAX_AGE}"
    value = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=") + "." + _sign(tok.secret, payload)
    response.set_cookie(COOKIE, value, max_age=SESSION_MAX_AGE, httponly=True, samesite="Strict",
                        secure=request.secure, path="/")
    return Principal(tok.name, tok.role, "session")


def logout(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/")


def identify(request: web.Request) -> Principal | None:
    return request.app[AUTH].identify(request)[0]


def same_origin(request: web.Request) -> bool:
    """A browser POST carries Origin (or at least Referer); it must name this server."""
    origin = request.headers.get("Origin") or request.headers.get("Referer") or ""
    if not origin:
        return False
    rest = origin.split("://", 1)[-1]
    return rest.split("/", 1)[0] == request.host


def install(app: web.Application) -> None:
    """Accept the session cookie wherever the API accepts credentials (app[AUTH] must be set)."""
    app[AUTH].add_identifier(session_identifier(app[AUTH]))
