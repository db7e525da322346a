"""What the incident page says a responder should do, in words: the same texts Slack shows.

At 3 a.m. ``reboot_node`` is a code to look up; "Drain and reboot the node (often a power cycle); save
dmesg and the BMC log first." is the instruction. The catalog's ``investigate`` text, the runbook as a link
and, for a throttling incident, which clock-event reasons cut the clocks come from the incident's primary
signal, and a storm's readings and advice from what the engine says of it, read through the same helpers
as every integration (alertd/integrations/presentation.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alertd.integrations.presentation import action_in_words, incident_action, runbook_url, storm_says
from alertd.core.vocabulary import GpuAction, SignalKind


@dataclass(frozen=True)
class Guide:
    action: str = ""  # the recommended action, in words
    investigate: str = ""
    runbook: str = ""  # the runbook's page name
    runbook_link: str = ""  # its URL when it can be one
    reasons: str = ""  # a throttling incident's clock-event reasons, in words
    reading: str = ""  # a storm's readings: its hottest GPU, range and median temperature
    advice: str = ""  # what to do about a storm as a whole (its event's advice)


def _words(code: str) -> str:
    return code.replace("_", " ")


def incident_guide(inc: Any, runbook_base_url: str) -> Guide:
    p = inc.primary
    if p is None:
        return Guide()
    chosen = incident_action(inc)  # a history verdict's action when it has one
    action = action_in_words(chosen)
    if action and p.drain and chosen == p.action and p.action != GpuAction.REBOOT_NODE:
        action += " Drain the GPU first."
    thermal = p.kind == SignalKind.THERMAL and p.detail
    reasons = ", ".join(_words(r) for r in p.detail.split(",") if r) if thermal else ""
    reading, advice = storm_says(inc)
    return Guide(action=action, investigate=p.investigate, runbook=p.runbook,
                 runbook_link=runbook_url(p.runbook, runbook_base_url), reasons=reasons, reading=reading,
                 advice=advice)
