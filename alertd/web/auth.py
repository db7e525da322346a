"""Who is asking, and may they: named tokens with roles, a trusted proxy header, basic auth.

The model (docs/security.md):

- Roles are ordered: ``read`` (list and show incidents) < ``act`` (ack, resolve,
  silence) < ``admin`` (reload, audit, acting on someone's behalf with ``?by=``).
- A token has a name and a role; the name is the actor recorded in the timeline
  and the audit trail. Several tokens may share a name (rotation: old and new
  are both valid until the old one is removed), and a ``token_file`` may hold
  several tokens, one per line.
- Behind an authenticating proxy (oauth2-proxy, an ingress with SSO) the user
  comes from a header such as ``X-Forwarded-User``, trusted only from the
  proxy's addresses.
- Other front doors (the browser session cookie) plug in with
  :meth:`Authenticator.add_identifier`, and turn a typed-in token into a
  principal with :meth:`Authenticator.login`.

Handlers ask with ``principal = authorize(request, Role.ACT)``: it returns the
principal or raises 401 (no or wrong credentials) / 403 (role too low) with a
JSON reason. Failures are counted (``alertd_auth_failures_total``) and logged at
most once a minute per surface and peer. Wrong and malformed credentials cost the
client a unit of its throttle (alertd.web.throttle), on the API and the receiver
alike. The credentials are compared first (in constant time): a right one is taken
whatever the throttle says, so a guesser behind Alertmanager's address never gets
Alertmanager refused. A wrong one from a throttled client gets 429, and since it
was compared, its answer is what the guesser learns from: those answers leave one
at a time per client, ``hold_back`` seconds apart (``answer_slot``), so however
many connections a guesser opens it learns one guess per 6 s beyond the bucket's,
as when a throttled guess was not compared at all.
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import logging
import time
from typing import Callable, Mapping

from aiohttp import web
from prometheus_client import Counter

from alertd.config.credentials import MALFORMED, Credentials, Principal, Role
from alertd.core.actor import Actor, stated_name
from alertd.config.settings import Config
from alertd.web.throttle import LoginThrottle

log = logging.getLogger(__name__)

LOG_EVERY = 60.0  # seconds between two failure log lines for one surface and peer
HOLD_BACK = 6.0  # seconds between two 429 answers to one client (one unit of its bucket)
QUEUED_ANSWERS = 10  # 429s waiting for their turn per client; past it a connection is closed unanswered
# alertd_auth_failures_total's reason label for each refusal; every other "why" is a wrong credential ("invalid").
FAILURE_REASONS = {"role": "role", "no credentials": "missing", MALFORMED: "malformed", "throttled": "throttled"}
ANONYMOUS = "anonymous"


Identifier = Callable[[web.Request], "Principal | None"]


class Authenticator:
    """The API's and the receiver's credentials, failure accounting, and extra front doors."""

    def __init__(self, api: Credentials, receiver: Credentials, *, insecure_no_auth: bool = False,
                 failures: Counter | None = None, clock: Callable[[], float] = time.monotonic):
        self.api, self.receiver = api, receiver
        self.insecure_no_auth = insecure_no_auth
        self.failures = failures  # a prometheus Counter labelled (surface, reason), or None
        self.clock = clock
        self.hold_back = HOLD_BACK  # seconds between two 429 answers to one client (the edge waits)
        self._next_answer: dict[str, float] = {}  # client -> clock() when its next 429 may leave
        self.throttle = LoginThrottle.default(clock)  # wrong API tokens, here and at the UI login
        self.receiver_throttle = LoginThrottle.default(clock)  # wrong receiver tokens (the webhook's route and lane)
        # The client a request comes from, for throttling: its TCP peer, or behind a trusted proxy the forwarded
        # address (build_app sets the edge's: alertd.web.guard.client_from).
        self.client_from: Callable[[str, Mapping[str, str]], str] = lambda peer, headers: peer
        self._identifiers: list[Identifier] = []
        self._last_log: dict[tuple[str, str], tuple[float, int]] = {}

    @classmethod
    def from_config(cls, cfg: Config, *, insecure_no_auth: bool = False,
                    failures: Counter | None = None) -> "Authenticator":
        return cls(cfg.api_auth, cfg.receiver_auth, insecure_no_auth=insecure_no_auth, failures=failures)

    def replace(self, other: "Authenticator") -> None:
        """Take new credentials (SIGHUP re-read the token files); identifiers and counters stay."""
        self.api, self.receiver = other.api, other.receiver

    def add_identifier(self, identify: Identifier) -> None:
        """Another way in, tried after the Authorization header and the proxy header (e.g. a session cookie)."""
        self._identifiers.append(identify)

    def login(self, token: str) -> Principal | None:
        """A typed-in API token -> its principal (the browser login exchanges it for a session)."""
        tok = self.api.check_token(token) if token.strip() else None
        return Principal(tok.name, tok.role, "token") if tok else None

    def identify(self, request: web.Request) -> tuple[Principal | None, str]:
        if not self.api.enabled:
            return Principal(ANONYMOUS, Role.ADMIN, "none"), ""
        principal, why = self.api.identify(request.headers, request.remote)
        if principal is None and why == "no credentials":
            for identify in self._identifiers:
                if (principal := identify(request)) is not None:
                    return principal, ""
        return principal, why

    def authorize(self, request: web.Request, role: Role) -> Principal:
        """The caller if it holds ``role``; else raise 401/403 (429 while throttled) with a JSON reason."""
        presented = request.headers.get("Authorization", "") if self.api.enabled else ""
        principal, why = self.identify(request)
        if principal is None:
            if presented:
                self.check_throttle(request, presented)
                self.throttle.failed(self.client_of(request), presented)
            self.failed("api", why, request)
            raise _error(web.HTTPUnauthorized, "missing or wrong credentials",
                         {"WWW-Authenticate": self.api.challenge()})
        if not principal.can(role):
            self.failed("api", "role", request, f"{principal.name} ({principal.role}) needs {role}")
            raise _error(web.HTTPForbidden, f"{principal.name} has role {principal.role}; this needs {role}")
        return principal

    def client_of(self, request: web.Request) -> str:
        return self.client_from(request.remote or "", request.headers)

    def check_throttle(self, request: web.Request, value: str, surface: str = "api") -> None:
        """429 with Retry-After when this client, or this value, failed too often lately (alertd.web.throttle)."""
        throttle = self.receiver_throttle if surface == "receiver" else self.throttle
        if wait := throttle.retry_after(self.client_of(request), value):
            self.failed(surface, "throttled", request, f"too many failed attempts; {wait} s to wait")
            raise _error(web.HTTPTooManyRequests, f"too many failed attempts; retry in {wait} s",
                         {"Retry-After": str(wait)})

    def authorize_webhook(self, request: web.Request) -> Principal:
        """The receiver's caller, or 401 (no, wrong or malformed credentials) / 429 (throttled like the API's)."""
        if not self.receiver.enabled:
            return Principal(ANONYMOUS, Role.ACT, "none")
        presented = request.headers.get("Authorization", "")
        principal, why = self.receiver.identify(request.headers, request.remote)
        if principal is None:
            if presented:
                self.check_throttle(request, presented, "receiver")
                self.receiver_throttle.failed(self.client_of(request), presented)
            self.failed("receiver", why, request)
            raise _error(web.HTTPUnauthorized, "missing or wrong credentials",
                         {"WWW-Authenticate": self.receiver.challenge()})
        return principal

    def receiver_principal(self, peer: str, headers: Mapping[str, str]) -> str | None:
        """Whose credentials these are, if the webhook's route would take them from this peer (the lane's
        question, which takes a request only then; None: it would not). Right credentials are taken whatever
        the client's throttle says; the route answers and counts every refusal (401, or 429 while throttled)."""
        if not self.receiver.enabled:
            return ANONYMOUS
        principal = self.receiver.identify(headers, peer)[0]
        return principal.name if principal is not None else None

    def answer_slot(self, client: str) -> float | None:
        """Seconds this client's 429 waits (its refusals leave one at a time, ``hold_back`` apart), or None
        when ten are waiting already: that one gets no answer at all."""
        now = self.clock()
        at = max(now, self._next_answer.get(client, now))
        if at - now > QUEUED_ANSWERS * self.hold_back:
            return None
        self._next_answer[client] = at + self.hold_back
        if len(self._next_answer) > 10_000:  # many clients: forget those whose slot has passed
            self._next_answer = {k: v for k, v in self._next_answer.items() if v > now}
        return at - now

    def failed(self, surface: str, why: str, request: web.Request, detail: str = "") -> None:
        """Count every failure; log one line per surface and peer a minute, with how many were held back."""
        reason = FAILURE_REASONS.get(why, "invalid")
        if self.failures is not None:
            self.failures.labels(surface, reason).inc()
        peer = request.remote or "?"
        now = self.clock()
        last, held = self._last_log.get((surface, peer), (-LOG_EVERY - 1.0, 0))
        if now - last < LOG_EVERY:
            self._last_log[(surface, peer)] = (last, held + 1)
            return
        if len(self._last_log) > 10_000:  # many peers: forget the oldest half
            for key in sorted(self._last_log, key=lambda k: self._last_log[k][0])[:5_000]:
                del self._last_log[key]
        self._last_log[(surface, peer)] = (now, 0)
        more = f" ({held} more in the last minute not logged)" if held else ""
        log.warning("%s authentication failed from %s: %s %s: %s%s", surface, peer, request.method,
                    request.path, detail or why, more)


def acting(principal: Principal, request: web.Request) -> Actor:
    """Who acts: the principal, with the name an admin stated with ``?by=`` beside it. The stated name is shown
    and audited; it never stands in for the principal (two approvers are two principals)."""
    by = stated_name(request.query.get("by", ""))
    return Actor(principal.name, by if by and principal.can(Role.ADMIN) else "")


def actor_for(principal: Principal, request: web.Request) -> str:
    """The actor as timelines and the audit trail show it: ``oncall``, or ``alice (admin)`` for ``?by=alice``."""
    return acting(principal, request).shown


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, auth: Authenticator) -> str:
    """Why serving on ``host`` is refused (one line), or "" when it is fine.

    Off loopback both surfaces need credentials: an open receiver lets anyone on the network open and
    resolve alert state (and so pages) even while the API is locked."""
    if is_loopback(host) or auth.insecure_no_auth:
        return ""
    missing = [(what, fix) for what, fix, creds in (
        ("API authentication", "api.auth.tokens", auth.api),
        ("receiver authentication", "receiver.auth.bearer_token_file (what Alertmanager's http_config sends)",
         auth.receiver)) if not creds.enabled]
    if not missing:
        return ""
    return (f"refusing to listen on {host or '*'} without {' and '.join(w for w, _ in missing)}: set "
            f"{' and '.join(f for _, f in missing)} (see docs/security.md), listen on 127.0.0.1, "
            "or pass --insecure-no-auth")


@functools.lru_cache(maxsize=256)
def token_fingerprint(secret: bytes) -> str:
    """What a stored session keeps of the token that opened it: PBKDF2, so a copy of the sessions table is
    no fast oracle for guessing the token. Cached: computed once per token, not per request."""
    return hashlib.pbkdf2_hmac("sha256", secret, b"alertd-session-token", 20_000).hex()


def _error(cls: type[web.HTTPException], message: str, headers: dict[str, str] | None = None) -> web.HTTPException:
    return cls(text=json.dumps({"error": message}), content_type="application/json", headers=headers)


AUTH = web.AppKey("auth", Authenticator)


def authorize(request: web.Request, role: Role) -> Principal:
    """``authorize(request, Role.ACT)`` in a handler: the caller, or a 401/403 raised."""
    return request.app[AUTH].authorize(request, role)

