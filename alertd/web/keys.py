"""The keys under which the web app holds what its handlers share: in a module of their own, so the app
and the handler modules it mounts (api, ui, slack_actions) do not import each other."""
from __future__ import annotations

from aiohttp import web

from alertd.service import Service

SERVICE = web.AppKey("service", Service)

__all__ = ["SERVICE"]
