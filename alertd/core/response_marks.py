"""How the engine marks the response to a fault, read by the engine and by routing (engine/response.py)."""
from __future__ import annotations

from alertd.core.model import Event, Incident
from alertd.core.vocabulary import EventKind

REPAIR_FAILED = EventKind.REPAIR_FAILED.value  # incident annotation {"at": ..., "why": ...}; also the event kind that says it
RESPONSE = "response"  # event data flag: the event only tells of the response to the fault (never news to a pager)


def repair_failed(inc: Incident) -> str:
    """Why the incident's repair failed, or ""."""
    found = inc.annotations.get(REPAIR_FAILED)
    return str(found.get("why") or "") if isinstance(found, dict) else ""


def notifies_again(kinds: tuple[str, ...]) -> bool:
    """Whether a page with these change kinds is news on an incident already paged: a failed repair. Pagers
    that de-duplicate by key (PagerDuty's dedup_key, Opsgenie's alias) notify nobody for a second trigger on
    an open alert, so they close it and open it again."""
    return REPAIR_FAILED in kinds


def is_response(event: Event) -> bool:
    return bool(event.data.get(RESPONSE))


def flagged(event: Event, response: bool) -> Event:
    """``event``, flagged as telling only of the response to a fault when ``response``."""
    if response:
        event.data[RESPONSE] = True
    return event
