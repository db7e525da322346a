"""The installation id in what leaves alertd: PagerDuty dedup keys and Slack button values.

Two alertd installations on one PagerDuty service (or one Slack app) would both call their
first incident ``INC-1``; prefixed with the installation id they never act on each other's.
Values without a prefix (buttons posted before the id existed) are still taken as this
installation's own.
"""
from __future__ import annotations

SEPARATOR = ":"


def scoped(installation_id: str, incident_id: str) -> str:
    return f"{installation_id}{SEPARATOR}{incident_id}" if installation_id else incident_id


def unscoped(value: str, installation_id: str) -> str | None:
    """The incident id a button value names, or None when it belongs to another installation."""
    prefix, sep, rest = value.rpartition(SEPARATOR)
    if not sep:
        return value  # an older, unprefixed value
    return rest if prefix == installation_id else None
