"""What a click on one of alertd's Slack buttons asks for, in alertd's words: the button IDs stay here.

alertd/integrations/slack/render.py draws the buttons; this reads a click back into a verb of
alertd/core/verbs.py (``acknowledge``, ``resolve``, ``silence`` with its duration, ``unsilence``,
and the remediation verbs ``approve``, ``override``, ``cancel``, ``stop``) and the button's value, the
installation-scoped incident id. The Slack adapter (alertd/web/slack_actions.py) checks the request and calls
the use case; it never sees a button ID.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from alertd.core.verbs import REMEDIATION_VERBS, Verb
from alertd.integrations.slack.render import (ACTION_ACK, ACTION_REMEDIATE, ACTION_RESOLVE, ACTION_SILENCE,
                                              ACTION_SILENCE_ANYWAY, ACTION_UNSILENCE)

BUTTON_VERBS = {ACTION_ACK: Verb.ACKNOWLEDGE, ACTION_RESOLVE: Verb.RESOLVE, ACTION_UNSILENCE: Verb.UNSILENCE}


@dataclass(frozen=True, slots=True)
class Click:
    verb: str  # "" for a button alertd does not know
    value: str  # the button's value: the incident id, scoped to the installation that drew it
    duration: str = ""  # silence: the button's 1h, 4h or 24h
    button: str = ""  # the action_id as sent, for a log line about an unknown one
    force: bool = False  # silence: confirmed although it mutes other open incidents too

    @property
    def remediation(self) -> bool:
        return self.verb in REMEDIATION_VERBS


def read_click(action: Mapping[str, object]) -> Click:
    """One element of a block_actions payload's ``actions``."""
    button, value = str(action.get("action_id", "")), str(action.get("value", ""))
    if button in BUTTON_VERBS:
        return Click(BUTTON_VERBS[button], value, button=button)
    if button.startswith(ACTION_SILENCE):
        return Click(Verb.SILENCE, value, button[len(ACTION_SILENCE):], button=button)
    if button.startswith(ACTION_SILENCE_ANYWAY):
        return Click(Verb.SILENCE, value, button[len(ACTION_SILENCE_ANYWAY):], button=button, force=True)
    verb = button.removeprefix(ACTION_REMEDIATE) if button.startswith(ACTION_REMEDIATE) else ""
    return Click(verb if verb in REMEDIATION_VERBS else "", value, button=button)


__all__ = ["Click", "read_click"]
