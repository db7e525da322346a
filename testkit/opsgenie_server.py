"""An Opsgenie Alert API v2 test server, strict to the documented contract.

POST /v2/alerts (create), POST /v2/alerts/{identifier}/acknowledge|close with
identifierType id|alias|tiny; ``Authorization: GenieKey <key>``; JSON bodies.
Valid requests answer 202 {"result": "Request will be processed", "took",
"requestId"} and are processed "asynchronously" (here: at once); an alias with
an open alert deduplicates a create (count + 1). Bad requests answer 422 (field
errors) or 400 (not JSON), unknown keys 401.
"""
from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from testkit.process import free_port

CREATE_FIELDS = {"message": 130, "alias": 512, "description": 15000, "entity": 512, "source": 100, "user": 100,
                 "note": 25000}
LIST_FIELDS = {"tags": (20, 50), "actions": (10, 50)}
PRIORITIES = {"P1", "P2", "P3", "P4", "P5"}
ACTION_FIELDS = {"user": 100, "source": 100, "note": 25000}


class OpsgenieTestServer:
    KEY = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

    def __init__(self, keys: tuple[str, ...] = (KEY,)):
        self.keys = set(keys)
        self.alerts: dict[str, dict[str, Any]] = {}  # alias -> alert
        self.requests: list[tuple[str, dict[str, Any]]] = []  # accepted (action, body)
        self.rejected: list[tuple[int, str]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v2/alerts", self._create)
        app.router.add_post("/v2/alerts/{identifier}/{action}", self._action)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _reject(self, status: int, message: str, errors: dict[str, str] | None = None) -> web.Response:
        self.rejected.append((status, message))
        body: dict[str, Any] = {"message": message, "took": 0.001, "requestId": str(uuid.uuid4())}
        if errors:
            body["errors"] = errors
        return web.json_response(body, status=status)

    async def _body(self, request: web.Request) -> tuple[dict[str, Any] | None, web.Response | None]:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("GenieKey ") or auth.removeprefix("GenieKey ") not in self.keys:
            return None, self._reject(401, "Could not authenticate")
        if request.content_type != "application/json":
            return None, self._reject(400, "Content-Type must be application/json")
        try:
            body = await request.json()
        except ValueError:
            return None, self._reject(400, "Could not parse JSON")
        if not isinstance(body, dict):
            return None, self._reject(400, "Body must be a JSON object")
        return body, None

    @staticmethod
    def _accepted() -> web.Response:
        return web.json_response({"result": "Request will be processed", "took": 0.01,
                                  "requestId": str(uuid.uuid4())}, status=202)

    async def _create(self, request: web.Request) -> web.Response:
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        assert body is not None
        errors: dict[str, str] = {}
        known = set(CREATE_FIELDS) | set(LIST_FIELDS) | {"details", "priority", "responders", "visibleTo"}
        for key in sorted(set(body) - known):
            errors[key] = "unknown field"
        if not isinstance(body.get("message"), str) or not body["message"].strip():
            errors["message"] = "Message can not be empty."
        for key, limit in CREATE_FIELDS.items():
            if key in body and (not isinstance(body[key], str) or len(body[key]) > limit):
                errors[key] = f"must be a string of at most {limit} characters"
        for key, (count, each) in LIST_FIELDS.items():
            value = body.get(key, [])
            if not isinstance(value, list) or len(value) > count or any(
                    not isinstance(v, str) or len(v) > each for v in value):
                errors[key] = f"at most {count} strings of at most {each} characters"
        details = body.get("details", {})
        if not isinstance(details, dict) or any(not isinstance(v, str) for v in details.values()):
            errors["details"] = "must map strings to strings"
        if "priority" in body and body["priority"] not in PRIORITIES:
            errors["priority"] = "must be one of P1..P5"
        if errors:
            return self._reject(422, "Request body is not processable", errors)
        self.requests.append(("create", body))
        alias = body.get("alias") or body["message"]
        alert = self.alerts.get(alias)
        if alert is not None and alert["status"] != "closed":
            alert["count"] += 1
            alert["priority"] = body.get("priority", alert["priority"])
        else:
            self.alerts[alias] = {"status": "open", "count": 1, "priority": body.get("priority", "P3"), "body": body}
        return self._accepted()

    async def _action(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        if action not in ("acknowledge", "close"):
            return self._reject(404, f"unknown action {action}")
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        assert body is not None
        kind = request.query.get("identifierType", "id")
        if kind not in ("id", "alias", "tiny"):
            return self._reject(422, "identifierType must be id, alias or tiny")
        errors = {k: "unknown field" for k in sorted(set(body) - set(ACTION_FIELDS))}
        errors.update({k: f"at most {n} characters" for k, n in ACTION_FIELDS.items()
                       if k in body and (not isinstance(body[k], str) or len(body[k]) > n)})
        if errors:
            return self._reject(422, "Request body is not processable", errors)
        self.requests.append((action, body))
        alert = self.alerts.get(request.match_info["identifier"]) if kind == "alias" else None
        if alert is not None and alert["status"] != "closed":  # otherwise "Alert does not exist" (still 202)
            alert["status"] = "acknowledged" if action == "acknowledge" else "closed"
        return self._accepted()
