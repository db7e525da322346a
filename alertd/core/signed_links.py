"""Signed links to one incident's page: what lets the Slack message's "Incident" link open without a token.

A link is ``/ui/incidents/{id}?exp={unix seconds}&sig={signature}``; the signature is HMAC-SHA256, keyed by a
secret only the server knows, over a fixed domain string, the incident id and the expiry, so a link for one
incident opens no other one, and its expiry cannot be moved. It opens that page read-only (no buttons) and
nothing else: no session is made, every other page still asks for a sign-in. Rotating the secret revokes
every link given out. The threat model is in docs/security.md ("Signed incident links").
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime, timedelta, timezone

DOMAIN = b"alertd signed incident page v1"
MAX_EXPIRY_DIGITS = 12  # unix seconds until the year 33658: anything longer is no expiry this server wrote


def signature(secret: str, incident_id: str, expires: int) -> str:
    message = b"\n".join((DOMAIN, incident_id.encode(), str(expires).encode()))
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def signed_query(secret: str, incident_id: str, now: datetime, lifetime: timedelta) -> dict[str, str]:
    """The query that opens ``incident_id``'s page until ``now + lifetime`` (to the second)."""
    expires = int((now + lifetime).timestamp())
    return {"exp": str(expires), "sig": signature(secret, incident_id, expires)}


def refusal(secret: str, incident_id: str, expires: str, sig: str, now: datetime) -> str:
    """Why this link does not open the page, or "" when it does. The signature is compared in constant time
    and checked before the expiry, so a forged link learns nothing about the time it would have needed."""
    if not secret:
        return "This server does not open incident pages from signed links (notify.slack.links is not configured)."
    if not (expires.isascii() and expires.isdigit() and len(expires) <= MAX_EXPIRY_DIGITS) or not sig.isascii():
        return "This link is damaged: it is not one alertd wrote."
    if not hmac.compare_digest(signature(secret, incident_id, int(expires)).encode(), sig.encode()):
        return ("This link's signature does not match: it was changed, or it names another incident, "
                "or the server's link key was rotated since it was written.")
    until = datetime.fromtimestamp(int(expires), timezone.utc)
    if until <= now:
        return f"This link expired on {until:%Y-%m-%d %H:%M} UTC."
    return ""
