"""What a person can do to an incident, by any door (Slack, the web UI, the API, the CLI through the API).

The names are declared once here; alertd/app/incident_actions.py carries each out, and each adapter reads its
own input (a Slack button, a URL segment, a form field) into one of them.
"""
from __future__ import annotations

from enum import StrEnum


class Verb(StrEnum):
    ACKNOWLEDGE = "acknowledge"
    RESOLVE = "resolve"
    SILENCE = "silence"  # an Alertmanager silence scoped to the incident's alerts, nodes and cluster
    UNSILENCE = "unsilence"
    APPROVE = "approve"  # the remediation verbs: decided by alertd/app/remediate.py
    OVERRIDE = "override"
    CANCEL = "cancel"
    STOP = "stop"
    RMA_HANDOFF = "rma_handoff"  # tickets per GPU with their evidence, once approved


REMEDIATION_VERBS: tuple[Verb, ...] = (Verb.APPROVE, Verb.OVERRIDE, Verb.CANCEL, Verb.STOP)
AUDITED_AS = {Verb.ACKNOWLEDGE: "ack"}  # the audit trail's name for a verb, where it differs


def verb_of(name: str) -> Verb | None:
    """The verb a door named, or None."""
    try:
        return Verb(name)
    except ValueError:
        return None


__all__ = ["AUDITED_AS", "REMEDIATION_VERBS", "Verb", "verb_of"]
