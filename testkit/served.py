"""A service's web application that starts and stops the service with it, as ``alertd serve`` runs
them (alertd/cli/serve.py) but in one aiohttp test server: for in-process tests and benchmarks."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from alertd.app.lifecycle import cleanup_ctx
from alertd.app.service import Service
from alertd.web.app import build_app


def served(svc: Service, auth: Any = None) -> web.Application:
    app = build_app(svc, auth)
    app.cleanup_ctx.append(cleanup_ctx(svc))
    return app
