"""The keys under which the web app holds what its handlers share: in a module of their own, so the app
and the handler modules it mounts (api, ui, slack_actions) do not import each other."""
from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web

from alertd.app.incident_actions import IncidentActions
from alertd.web.host import WebHost

SERVICE: web.AppKey[WebHost] = web.AppKey("service")
# What people do to an incident (alertd/app/incident_actions.py), for every door: Slack, the UI, the API.
INCIDENT_ACTIONS: web.AppKey[IncidentActions] = web.AppKey("incident_actions")
# Where POST /-/reload goes instead of this process's own rules: a receiver of ``serve --receivers N``
# asks its engine process, which reloads the whole group (alertd/app/receiver_group.py). Returns (ok, error).
RELOAD: web.AppKey[Callable[[], Awaitable[tuple[bool, str]]]] = web.AppKey("reload")

__all__ = ["INCIDENT_ACTIONS", "RELOAD", "SERVICE"]
