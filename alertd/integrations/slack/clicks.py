"""What a click on one of alertd's Slack buttons asks for, in alertd's words: the button IDs stay here.

alertd/integrations/slack/render.py draws the buttons; this reads a click back into a verb declared in
alertd/core/verbs.py and the button's value, the installation-scoped incident id. A verb's button is
``alertd_<word>`` (``alertd_ack``, ``alertd_resolve``, ``alertd_unsilence``), followed by ``_<duration>``
for a verb that takes one (``alertd_silence_4h``); a remediation verb's is ``alertd_remediation_<name>``;
``alertd_silenceanyway_<duration>`` confirms a silence that mutes other open incidents too. The Slack adapter
(alertd/web/slack_actions.py) checks the request and calls the use case; it never sees a button ID.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from alertd.core.verbs import VERBS, Verb, by_word
from alertd.integrations.slack.render import ACTION_PREFIX, ACTION_REMEDIATE, ACTION_SILENCE_ANYWAY


@dataclass(frozen=True, slots=True)
class Click:
    verb: str  # "" for a button alertd does not know
    value: str  # the button's value: the incident id, scoped to the installation that drew it
    duration: str = ""  # silence: the button's 1h, 4h or 24h
    button: str = ""  # the action_id as sent, for a log line about an unknown one
    force: bool = False  # silence: confirmed although it mutes other open incidents too

    @property
    def remediation(self) -> bool:
        declared = VERBS.get(self.verb)
        return declared is not None and declared.remediation


def read_click(action: Mapping[str, object]) -> Click:
    """One element of a block_actions payload's ``actions``."""
    button, value = str(action.get("action_id", "")), str(action.get("value", ""))
    if button.startswith(ACTION_SILENCE_ANYWAY):
        return Click(Verb.SILENCE, value, button[len(ACTION_SILENCE_ANYWAY):], button=button, force=True)
    if button.startswith(ACTION_REMEDIATE):
        verb = by_word(button.removeprefix(ACTION_REMEDIATE), remediation=True)
        return Click(verb.name if verb is not None and verb.slack else "", value, button=button)
    rest = button.removeprefix(ACTION_PREFIX) if button.startswith(ACTION_PREFIX) else ""
    for verb in VERBS.values():
        if not verb.slack or verb.remediation:
            continue
        if verb.duration and rest.startswith(verb.wire + "_"):
            return Click(verb.name, value, rest[len(verb.wire) + 1:], button=button)
        if not verb.duration and rest == verb.wire:
            return Click(verb.name, value, button=button)
    return Click("", value, button=button)


__all__ = ["Click", "read_click"]
