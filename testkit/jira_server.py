"""A strict stand-in for Jira Cloud's REST API v3 (issue create, enhanced JQL search), and for a signed RMA webhook.

Jira's documented contract (developer.atlassian.com, "The Jira Cloud platform REST API", Issues and Issue
search), as the real one answers:

* Basic auth with the account's email and an API token; anything else -> 401 with a text body
  ("Client must be authenticated to access this resource.").
* ``POST /rest/api/3/issue`` ``{"fields": {...}}`` -> 201 ``{"id", "key", "self"}``; a bad field -> 400
  ``{"errorMessages": [], "errors": {field: why}}``: an unknown project key (``project``), issue type
  (``issuetype``), no summary or one past 255 characters (``summary``), a description that is not an
  Atlassian document (``description``: a v3 description must be ``{"type": "doc", "version": 1, "content"}``),
  a label with a space (``labels``). Malformed JSON -> 400 with ``errorMessages``.
* ``POST /rest/api/3/search/jql`` ``{"jql", "fields", "maxResults"}`` -> 200 ``{"issues": [{"id", "key",
  "self", "fields"}], "isLast": true}``; the JQL understood here is ``project = "K" AND labels = "L"``
  (anything else -> 400 with ``errorMessages``).

Recorded: ``issues`` (key -> the fields created), ``creates`` (every create request, accepted or not) and
``searches``. ``fail_next(status)`` answers the next request with that status; ``lose_reply_next()`` creates
the issue and then drops the connection before the answer (a crash between create and record).

``RmaWebhookServer``: the receiving end of alertd's signed RMA webhook; checks ``X-Alertd-Signature``
(HMAC-SHA256 of ``<timestamp>.<body>``) and refuses a bad one, or a timestamp more than five minutes from
now (a replay), with 401; records ``calls`` and answers
``{"key": "RMA<n>", "url": ...}`` like a ticketing system that names its ticket.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from typing import Any

from aiohttp import web

from testkit.loopback import LoopbackServer

EMAIL, TOKEN = "ops@example.com", "ATATT3xFfGF0-test-token"
MAX_AGE = 300  # seconds a signed request's X-Alertd-Timestamp may be from now
JQL = re.compile(r'^project = "([A-Z][A-Z0-9_]+)" AND labels = "([^"\s]+)"$')


class JiraServer(LoopbackServer):
    def __init__(self, *, projects: tuple[str, ...] = ("HW",), issue_types: tuple[str, ...] = ("Task", "Bug")):
        super().__init__()
        self.projects, self.issue_types = projects, issue_types
        self.issues: dict[str, dict[str, Any]] = {}
        self.creates: list[dict[str, Any]] = []
        self.searches: list[str] = []
        self._fail: list[int] = []
        self._lose = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/rest/api/3/issue", self._create)
        app.router.add_post("/rest/api/3/search/jql", self._search)
        return app

    def fail_next(self, status: int) -> None:
        self._fail.append(status)

    def lose_reply_next(self) -> None:
        self._lose += 1

    def _authorized(self, request: web.Request) -> bool:
        want = "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
        return hmac.compare_digest(request.headers.get("Authorization", ""), want)

    async def _gate(self, request: web.Request) -> tuple[web.Response | None, Any]:
        if not self._authorized(request):
            return web.Response(status=401, text="Client must be authenticated to access this resource."), None
        if self._fail:
            status = self._fail.pop(0)
            return web.json_response({"errorMessages": [f"injected {status}"], "errors": {}}, status=status), None
        try:
            return None, json.loads(await request.text())
        except ValueError:
            return web.json_response({"errorMessages": ["Unexpected character: was expecting JSON"],
                                      "errors": {}}, status=400), None

    async def _create(self, request: web.Request) -> web.StreamResponse:
        refused, doc = await self._gate(request)
        self.creates.append(doc if isinstance(doc, dict) else {})
        if refused is not None:
            return refused
        fields = doc.get("fields") if isinstance(doc, dict) else None
        errors = self.field_errors(fields if isinstance(fields, dict) else {})
        if errors:
            return web.json_response({"errorMessages": [], "errors": errors}, status=400)
        assert isinstance(fields, dict)
        key = f"{fields['project']['key']}-{len(self.issues) + 1}"
        self.issues[key] = fields
        issue_id = str(10000 + len(self.issues))
        if self._lose:
            self._lose -= 1
            assert request.transport is not None
            request.transport.close()  # created, and the answer never arrives
            return web.Response(status=201)
        return web.json_response({"id": issue_id, "key": key, "self": f"{self.url}/rest/api/3/issue/{issue_id}"},
                                 status=201)

    def field_errors(self, fields: dict[str, Any]) -> dict[str, str]:
        errors: dict[str, str] = {}
        if (fields.get("project") or {}).get("key") not in self.projects:
            errors["project"] = "Specify a valid project ID or key"
        if (fields.get("issuetype") or {}).get("name") not in self.issue_types:
            errors["issuetype"] = "Specify a valid issue type"
        summary = fields.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            errors["summary"] = "You must specify a summary of the issue."
        elif len(summary) > 255:
            errors["summary"] = "Summary must be less than 255 characters."
        desc = fields.get("description")
        if desc is not None and not (isinstance(desc, dict) and desc.get("type") == "doc"
                                     and desc.get("version") == 1 and isinstance(desc.get("content"), list)):
            errors["description"] = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"
        for label in fields.get("labels") or []:
            if not isinstance(label, str) or re.search(r"\s", label) or len(label) > 255:
                errors["labels"] = f"The label '{label}' contains spaces which is invalid."
        return errors

    async def _search(self, request: web.Request) -> web.StreamResponse:
        refused, doc = await self._gate(request)
        if refused is not None:
            return refused
        jql = str(doc.get("jql", "")) if isinstance(doc, dict) else ""
        self.searches.append(jql)
        m = JQL.match(jql)
        if m is None:
            return web.json_response({"errorMessages": [f"Error in the JQL Query: {jql!r}"], "errors": {}},
                                     status=400)
        found = [(k, f) for k, f in self.issues.items()
                 if f["project"]["key"] == m.group(1) and m.group(2) in f.get("labels", [])]
        limit = int(doc.get("maxResults", 50))
        return web.json_response({"issues": [{"id": str(10000 + i), "key": k, "self": f"{self.url}/rest/api/3/issue/{k}",
                                              "fields": {"labels": f.get("labels", [])}}
                                             for i, (k, f) in enumerate(found[:limit], 1)], "isLast": True})


class RmaWebhookServer(LoopbackServer):
    def __init__(self, secret: str):
        super().__init__()
        self.secret = secret
        self.calls: list[dict[str, Any]] = []
        self.refused = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/rma", self._receive)
        return app

    async def _receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        ts = request.headers.get("X-Alertd-Timestamp", "")
        want = "sha256=" + hmac.new(self.secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        if (not ts.isdigit() or abs(time.time() - int(ts)) > MAX_AGE
                or not hmac.compare_digest(request.headers.get("X-Alertd-Signature", ""), want)):
            self.refused += 1
            return web.json_response({"error": "bad signature"}, status=401)
        self.calls.append({"delivery": request.headers.get("X-Alertd-Delivery", ""), "body": json.loads(body)})
        key = f"RMA{len(self.calls):04d}"
        return web.json_response({"key": key, "url": f"{self.url}/tickets/{key}"}, status=201)
