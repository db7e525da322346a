"""Who did something: the authenticated principal, and the name the request stated, if any.

A rule that counts people (two approvers for a large remediation) counts principals:
the API token's name, the browser session's or the proxy's user, the Slack user ID.
A name the client states (``?by=`` from an admin token acting for a person, a Slack
display name, which its owner may change at any time) is recorded beside the
principal, never instead of it.
"""
from __future__ import annotations

from dataclasses import dataclass

ENGINE = "alertd"  # alertd itself: proposals, the executor's transitions


@dataclass(frozen=True, slots=True)
class Actor:
    principal: str  # "oncall" (token, session), "alice@example.com" (proxy), "slack:U024BE7LH"
    stated: str = ""  # "alice" from ?by=alice, "ana" from a Slack payload's user name

    @property
    def shown(self) -> str:
        """What timelines and the audit trail show: ``alice (oncall)``, ``ana (slack:U0ANA)``, or ``oncall``."""
        return f"{self.stated} ({self.principal})" if self.stated and self.stated != self.principal else self.principal

    def __str__(self) -> str:
        return self.shown


def stated_name(value: str) -> str:
    """A client-stated name made safe to show: printable, one line, at most 200 characters."""
    return "".join(c for c in value if c.isprintable()).strip()[:200]
