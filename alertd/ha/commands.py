"""Incident commands (alertd/core/incident_commands.py) taken on a process that does not run the engine.

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

from alertd.core.incident_commands import IncidentCommand, UnknownCommand, command_from
from alertd.core.json_types import JSONObject, obj
from alertd.core.model import Change, Incident

log = logging.getLogger(__name__)
FORWARD_TIMEOUT = 2.5  # seconds: Slack wants an answer within 3


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


class CommandRunner(Protocol):
    """The leader's engine (alertd/app/actions.py): runs a forwarded command in one engine step."""

    async def run(self, command: IncidentCommand) -> list[Change]: ...


async def forward(store: CommandStore, command: IncidentCommand, timeout: float = FORWARD_TIMEOUT) -> list[Change]:
    """Hand a command to the leader and wait for it; [] when the leader found nothing to change."""
    command_id = await store.submit_command(command.kind, command.incident_id, command.args())
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        state, result = await store.command_result(command_id)
        if state == "done":
            if not obj(json.loads(result or "{}"), "a command's result").get("changed"):
                return []
            inc = await store.get_incident(command.incident_id)
            return [Change(incident=inc, kinds=[command.kind])] if inc is not None else []
        await asyncio.sleep(delay)
        delay = min(0.1, delay * 2)
    raise CommandTimeout(f"{command.kind} {command.incident_id}: no engine leader answered within {timeout:.1f}s; "
                         "retry")


async def run_pending(store: CommandStore, runner: CommandRunner) -> int:
    """On the leader: carry out the forwarded commands, oldest first. Returns how many were done."""
    done = 0
    for command_id, kind, incident_id, args in await store.pending_commands():
        try:
            changes = await runner.run(command_from(kind, incident_id, args))
            result: JSONObject = {"changed": bool(changes)}
        except UnknownCommand as exc:
            log.error("%s (command %d) dropped", exc, command_id)
            result = {"changed": False, "error": str(exc)}
        except Exception as exc:  # a command that fails must not block the ones behind it
            log.exception("forwarded command %s on %s failed", kind, incident_id)
            result = {"changed": False, "error": f"{type(exc).__name__}: {exc}"}
        await store.finish_command(command_id, json.dumps(result))
        done += 1
    return done
