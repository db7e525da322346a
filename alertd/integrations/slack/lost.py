"""A Slack post whose answer was lost is found again in the channel, never posted twice.

``chat.postMessage`` is not idempotent. If the process dies (kill -9, a deposed
leader, a lost connection) after Slack accepted the post but before its ``ts``
was saved, the next attempt would post the incident a second time. So:

* every top-level incident message carries message metadata
  (``event_type: alertd_incident``, ``event_payload: {installation, incident}``);
* before such a post, the notifier saves a write-ahead ref ``unconfirmed:<channel
  id>:<unix time>`` for the incident and target: "a post may be under way";
* the ``ts`` that ``chat.postMessage`` returns replaces it (as before).

A delivery that finds an ``unconfirmed`` ref is exactly the case where a post
MAY have reached Slack without its answer being kept: an attempt started and
nobody recorded how it ended (the process died, or the answer was lost and the
item is being retried, here or on a new leader). Only then does it read the
channel's recent history (``conversations.history`` with
``include_all_metadata``, from a minute before the attempt started) for its own
message and adopts that ``ts``. The ordinary first post never looks (no
unconfirmed ref yet), nor does an item that the rate-limit stage held back
(it never reached the deliver stage). A post that Slack refused outright (429,
``invalid_blocks``) leaves the ref behind too, so its retry reads history once:
one read rather than telling refusals apart from lost answers.

Why a write-ahead ref rather than "the item was attempted before" or "the engine
just took over": a kill -9 during the post leaves no trace on the outbox item
(its attempts are counted only when a failure is recorded), and "took over"
would make every backlog item after a restart read history although nearly all
of them never reached Slack. The ref costs one small store write per top-level
post, which is also fenced on PostgreSQL: a deposed leader cannot even start one.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Awaitable, Callable

from alertd.core.json_types import JSONObject, as_object, objects, text

log = logging.getLogger(__name__)
EVENT_TYPE = "alertd_incident"
UNCONFIRMED = "unconfirmed:"
CLOCK_MARGIN = 60.0  # seconds before the attempt that the search starts: Slack's clock against ours
PAGE = 200  # messages asked per page (Slack may give fewer: 15 for apps outside the Marketplace)
MAX_PAGES = 10  # the search stops here and posts, rather than reading a busy channel's whole day
CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{8,}$")
# The lookup cannot work with these; it is logged once and the notifier posts as it did before.
UNUSABLE = frozenset({"missing_scope", "not_in_channel", "channel_not_found", "invalid_auth", "not_allowed_token_type"})


def metadata(installation: str, incident_id: str) -> JSONObject:
    """The message metadata of a top-level incident message."""
    return {"event_type": EVENT_TYPE, "event_payload": {"installation": installation, "incident": incident_id}}


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """A post that was started and whose answer was not kept."""

    channel_id: str  # "" when the target names the channel and its id was not known yet
    started: float  # unix seconds

    @property
    def ref(self) -> str:
        return f"{UNCONFIRMED}{self.channel_id}:{self.started:.6f}"

    @classmethod
    def parse(cls, ref: str | None) -> "Unconfirmed | None":
        if not ref or not ref.startswith(UNCONFIRMED):
            return None
        channel_id, _, started = ref[len(UNCONFIRMED):].rpartition(":")
        try:
            return cls(channel_id, float(started))
        except ValueError:
            return cls(channel_id, 0.0)


Call = Callable[[JSONObject], Awaitable[JSONObject]]  # one Web API method with these arguments
LIST_PAGE = 1000
MAX_LIST_PAGES = 20


async def find_channel(listing: Call, name: str) -> str | None:
    """The id of the channel ``#name`` (conversations.list, public and private), or None. Only needed when a
    post to a channel configured by name lost its answer before alertd ever learnt that channel's id."""
    wanted, cursor = name.lstrip("#"), ""
    for _ in range(MAX_LIST_PAGES):
        args: JSONObject = {"types": "public_channel,private_channel", "exclude_archived": True, "limit": LIST_PAGE}
        if cursor:
            args["cursor"] = cursor
        page = await listing(args)
        for channel in objects(page.get("channels")):
            if channel.get("name") == wanted and text(channel, "id"):
                return text(channel, "id")
        cursor = text(as_object(page.get("response_metadata")), "next_cursor")
        if not cursor:
            return None
    return None


async def find_post(history: Call, channel_id: str, since: float, installation: str,
                    incident_id: str) -> str | None:
    """The ts of this installation's top-level message for the incident, posted since ``since`` (minus the
    clock margin), or None. Raises what ``history`` raises (rate limits, errors)."""
    cursor = ""
    for _ in range(MAX_PAGES):
        args: JSONObject = {"channel": channel_id, "oldest": f"{max(0.0, since - CLOCK_MARGIN):.6f}",
                            "limit": PAGE, "include_all_metadata": True}
        if cursor:
            args["cursor"] = cursor
        page = await history(args)
        for msg in objects(page.get("messages")):
            if _is_ours(msg, installation, incident_id):
                return text(msg, "ts")
        cursor = text(as_object(page.get("response_metadata")), "next_cursor") if page.get("has_more") else ""
        if not cursor:
            return None
    log.warning("Slack channel %s: no message for %s in the first %d pages of its history since the lost post; "
                "posting again", channel_id, incident_id, MAX_PAGES)
    return None


def _is_ours(msg: JSONObject, installation: str, incident_id: str) -> bool:
    meta = as_object(msg.get("metadata"))
    payload = as_object(meta.get("event_payload"))
    top = msg.get("thread_ts") in (None, msg.get("ts"))
    return (top and meta.get("event_type") == EVENT_TYPE and payload.get("incident") == incident_id
            and payload.get("installation", "") == installation and bool(msg.get("ts")))
