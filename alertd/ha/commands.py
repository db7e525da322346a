"""Actions (acknowledge, resolve, annotate) taken on a process that does not run the engine.

A follower or receiver process writes the action to the store's ``commands``
table and waits for the leader to carry it out (the leader checks the table on
every processing round), so a Slack button or an API call works whichever
replica the load balancer picked. The answer is the incident as the leader left it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Protocol

from alertd.core.json_types import JSONObject, JSONValue, as_text, obj
from alertd.core.model import Change, Incident
from alertd.core.tickets import TicketLink

log = logging.getLogger(__name__)
FORWARD_TIMEOUT = 2.5  # seconds: Slack wants an answer within 3
KINDS = ("acknowledge", "resolve", "annotate", "link_ticket")


class CommandTimeout(RuntimeError):
    """No leader carried the action out in time (none elected, or the store is failing)."""


class CommandStore(Protocol):
    """The store's ``commands`` table (alertd/store/coordination.py), and the incident a done action left."""

    async def submit_command(self, kind: str, incident_id: str, args: JSONObject) -> int: ...

    async def command_result(self, command_id: int) -> tuple[str, str]:
        """(state, result JSON): state "pending", "done" or "missing"."""

    async def pending_commands(self, limit: int = 50) -> list[tuple[int, str, str, JSONObject]]:
        """(id, kind, incident id, args) of the actions not carried out yet, oldest first."""

    async def finish_command(self, command_id: int, result: str) -> None: ...

    async def get_incident(self, incident_id: str) -> Incident | None: ...


class ActionTaker(Protocol):
    """The leader's engine (alertd/app/service.py's Service): carries a forwarded action out."""

    async def acknowledge(self, incident_id: str, actor: str) -> list[Change]: ...

    async def resolve(self, incident_id: str, actor: str) -> list[Change]: ...

    async def annotate(self, incident_id: str, key: str, value: JSONValue, kind: str, text: str = "",
                       actor: str = "") -> list[Change]: ...

    async def link_ticket(self, incident_id: str, ticket: TicketLink, actor: str = "") -> list[Change]: ...


async def forward(store: CommandStore, kind: str, incident_id: str, args: JSONObject,
                  timeout: float = FORWARD_TIMEOUT) -> list[Change]:
    """Hand an action to the leader and wait for it; [] when the leader found nothing to change."""
    command_id = await store.submit_command(kind, incident_id, args)
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        state, result = await store.command_result(command_id)
        if state == "done":
            if not obj(json.loads(result or "{}"), "a command's result").get("changed"):
                return []
            inc = await store.get_incident(incident_id)
            return [Change(incident=inc, kinds=[kind])] if inc is not None else []
        await asyncio.sleep(delay)
        delay = min(0.1, delay * 2)
    raise CommandTimeout(f"{kind} {incident_id}: no engine leader answered within {timeout:.1f}s; retry")


async def run_pending(store: CommandStore, service: ActionTaker) -> int:
    """On the leader: carry out the forwarded actions, oldest first. Returns how many were done."""
    done = 0
    for command_id, kind, incident_id, args in await store.pending_commands():
        try:
            actor = as_text(args.get("actor"))
            if kind == "acknowledge":
                changes = await service.acknowledge(incident_id, actor)
            elif kind == "resolve":
                changes = await service.resolve(incident_id, actor)
            elif kind == "annotate":
                changes = await service.annotate(incident_id, str(args["key"]), args.get("value"),
                                                 as_text(args.get("kind"), "annotated"), as_text(args.get("text")), actor)
            elif kind == "link_ticket":
                changes = await service.link_ticket(incident_id, TicketLink.from_json(obj(args.get("ticket") or {}, "ticket")),
                                                    as_text(args.get("actor")))
            else:
                log.error("unknown forwarded action %r (command %d) dropped", kind, command_id)
                changes = []
            result: JSONObject = {"changed": bool(changes)}
        except Exception as exc:  # an action that fails must not block the ones behind it
            log.exception("forwarded action %s on %s failed", kind, incident_id)
            result = {"changed": False, "error": f"{type(exc).__name__}: {exc}"}
        await store.finish_command(command_id, json.dumps(result))
        done += 1
    return done
