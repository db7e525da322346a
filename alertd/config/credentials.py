"""Who may call alertd, as configured: roles, named tokens, basic users and a trusted proxy header.

Parsed once from the configuration (``api.auth`` and ``receiver.auth``); the web layer
(alertd.web.auth) asks these objects on every request.
"""
from __future__ import annotations

import base64
import enum
import hmac
import ipaddress
from dataclasses import dataclass, field
from typing import Annotated, Iterable, Mapping

import msgspec
from msgspec import Meta

from alertd.core.sections import Section

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

class Role(enum.StrEnum):
    """What a caller may do, each including the ones before. read: list and show incidents; act: also ack, resolve, silence; admin: also reload, audit, ?by=."""

    READ = "read"
    ACT = "act"
    ADMIN = "admin"


ROLES = tuple(Role)
NETWORK_PATTERN = "^[0-9a-fA-F:.]+(/[0-9]{1,3})?$"  # an address or a CIDR network; ipaddress checks the rest
# HTTP authentication schemes (IANA's registry, and two common unregistered ones) a log line may name.
KNOWN_SCHEMES = frozenset({"basic", "bearer", "digest", "hoba", "mutual", "negotiate", "ntlm", "oauth", "privatetoken",
                           "scram-sha-1", "scram-sha-256", "vapid", "dpop", "gnap", "concealed", "token", "apikey"})
MALFORMED = "malformed credentials"  # the reason given for credentials no configured one can be


class TokenEntry(Section, frozen=True, kw_only=True):
    name: Annotated[str, Meta(min_length=1, max_length=200)]
    role: Role = Role.READ
    token: Annotated[str, Meta(min_length=16, description="At least 16 characters; a file may hold several, one per line.")]


class BasicUser(Section, frozen=True):
    username: Annotated[str, Meta(min_length=1)]
    password: Annotated[str, Meta(min_length=1)]
    role: Role = Role.ADMIN


class TrustedProxySettings(Section, frozen=True):
    """An authenticating proxy in front of alertd names the user in a header, believed only from its addresses."""

    header: Annotated[str, Meta(min_length=1, description="The header naming the user.")] = "X-Forwarded-User"
    from_: Annotated[tuple[Annotated[str, Meta(pattern=NETWORK_PATTERN)], ...], Meta(min_length=1, description=(
        "Proxy addresses or networks (CIDR); loopback only by default."))] = \
        msgspec.field(default=("127.0.0.1/32", "::1/128"), name="from")
    users: Annotated[dict[str, Role], Meta(description="Role per user name.")] = msgspec.field(default_factory=dict)
    default_role: Annotated[Role, Meta(description="Role of users not listed.")] = Role.READ


class AuthSettings(Section, frozen=True):
    """Who may call. Every secret may come from a file instead: bearer_token_file, tokens[].token_file, basic.password_file (docs/security.md)."""

    bearer_token: Annotated[str, Meta(min_length=1, description=(
        "One token with the admin role (what Alertmanager's http_config authorization.credentials sends). Several "
        "lines: several valid tokens (rotation)."))] | msgspec.UnsetType = msgspec.UNSET
    tokens: Annotated[tuple[TokenEntry, ...], Meta(description=(
        "Named tokens with roles; the name is the actor in timelines and the audit trail. Two entries with one "
        "name: both valid (rotation)."))] = ()
    basic: BasicUser | None = None
    trusted_proxy: TrustedProxySettings | None = None


def role_rank(role: Role) -> int:
    return ROLES.index(role)


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: ``name`` is the actor written to timelines and the audit trail."""

    name: str
    role: Role
    via: str  # "token", "basic", "proxy", "session", "none" (auth off), ...

    def can(self, role: Role) -> bool:
        return role_rank(self.role) >= role_rank(role)


@dataclass(frozen=True, slots=True)
class NamedToken:
    name: str
    role: Role
    secret: bytes


@dataclass(frozen=True, slots=True)
class TrustedProxy:
    """A user name in ``header``, believed only when the TCP peer is in ``networks``."""

    header: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    users: dict[str, Role]  # name -> role
    default_role: Role

    def trusts(self, peer: str | None) -> bool:
        if not peer:
            return False
        try:
            addr = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        return any(addr in net for net in self.networks)


@dataclass(slots=True)
class Credentials:
    """One surface's accepted credentials (the API, or the Alertmanager receiver)."""

    tokens: list[NamedToken] = field(default_factory=list)
    basic: list[tuple[str, str, Role]] = field(default_factory=list)  # (username, password, role)
    proxy: TrustedProxy | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.tokens or self.basic or self.proxy)

    def challenge(self) -> str:
        return "Bearer" if self.tokens or not self.basic else 'Basic realm="alertd"'

    @classmethod
    def from_settings(cls, auth: AuthSettings | None, *, default_name: str = "api") -> "Credentials":
        """``api.auth`` / ``receiver.auth`` (secrets read from their ``*_file`` by alertd.config.secrets).

        The single ``bearer_token`` / ``basic`` of older configs stay valid, with the admin role."""
        auth = auth or AuthSettings()
        tokens: list[NamedToken] = []
        if auth.bearer_token:
            tokens += _tokens(default_name, Role.ADMIN, auth.bearer_token)
        for entry in auth.tokens:
            tokens += _tokens(entry.name, entry.role, entry.token)
        basic = [(auth.basic.username, auth.basic.password, auth.basic.role)] if auth.basic else []
        p = auth.trusted_proxy
        proxy = None if p is None else TrustedProxy(header=p.header, networks=trusted_networks(p.from_),
                                                    users=dict(p.users), default_role=p.default_role)
        return cls(tokens, basic, proxy)

    def check_token(self, value: str) -> NamedToken | None:
        """Constant-time comparison against every token (no early exit that would time the match).

        A header's undecodable bytes arrive as surrogate escapes (aiohttp decodes heads as UTF-8 with
        ``surrogateescape``): they are encoded back to those bytes, which match no token, never raise."""
        given = value.strip().encode("utf-8", "surrogateescape")
        found = None
        for tok in self.tokens:
            if hmac.compare_digest(given, tok.secret) and found is None:
                found = tok
        return found

    def identify(self, headers: Mapping[str, str], peer: str | None) -> tuple[Principal | None, str]:
        """(principal, "") or (None, why) from a request's headers and TCP peer address.

        ``why`` is MALFORMED for credentials that cannot be any configured one (bytes that are not printable
        ASCII): refused like wrong ones (401, counted, throttled), never an error of the server's."""
        header = headers.get("Authorization", "")
        if header and not _printable_ascii(header):
            return None, MALFORMED
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and self.tokens:
            tok = self.check_token(value)
            return (Principal(tok.name, tok.role, "token"), "") if tok else (None, "wrong token")
        if scheme.lower() == "basic" and self.basic:
            return self._check_basic(value)
        user = headers.get(self.proxy.header, "").strip() if self.proxy is not None else ""
        if self.proxy is not None and user:
            if not self.proxy.trusts(peer):
                return None, f"{self.proxy.header} from an untrusted address"
            if not user.isprintable():  # control characters, or undecodable bytes (surrogate escapes)
                return None, MALFORMED
            return Principal(user[:200], self.proxy.users.get(user, self.proxy.default_role), "proxy"), ""
        if header:  # the scheme is named only when it is a known one: a bare token would be its first word
            named = scheme if scheme.lower() in KNOWN_SCHEMES else "not Bearer or Basic"
            return None, f"unsupported authorization scheme ({named})"
        return None, "no credentials"

    def _check_basic(self, value: str) -> tuple[Principal | None, str]:
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None, MALFORMED
        found = None
        for name, secret, role in self.basic:
            ok = hmac.compare_digest(user.encode(), name.encode()) & hmac.compare_digest(password.encode(), secret.encode())
            if ok and found is None:
                found = Principal(name, role, "basic")
        return (found, "") if found else (None, "wrong username or password")


def _printable_ascii(value: str) -> bool:
    """What an Authorization value can be (RFC 9110 token68 and auth-params are visible ASCII and spaces)."""
    return value.isascii() and value.isprintable()


def _tokens(name: str, role: Role, text: str) -> list[NamedToken]:
    """A token value (or file) may hold several tokens, one per line: old and new during a rotation."""
    return [NamedToken(name, role, line.strip().encode()) for line in text.splitlines() if line.strip()]


def trusted_networks(values: Iterable[object] | None) -> tuple[Network, ...]:
    """``api.trusted_proxies``: addresses or CIDR networks (ValueError names a bad one)."""
    return tuple(ipaddress.ip_network(str(v), strict=False) for v in values or ())
