"""A strict stand-in for the PagerDuty Events API v2, for tests of the PagerDuty notifier.

    server = PagerDutyTestServer()
    url = await server.start()      # http://127.0.0.1:PORT/v2/enqueue
    POST url {"routing_key": PagerDutyTestServer.ROUTING_KEY, "event_action": "trigger",
              "dedup_key": "incident-42", "payload": {...}}
    server.alerts["incident-42"][-1]["status"] == "triggered"
    await server.stop()

Contract (developer.pagerduty.com, "Send an Alert Event" and "Events API v2
Overview"), with the answers the real endpoint gives:

* ``POST /v2/enqueue`` with a JSON object body of at most 512 KB.
* ``routing_key``: the 32 character integration key; the server knows the keys
  in ``routing_keys`` (default: :attr:`ROUTING_KEY`). ``event_action``:
  ``trigger``, ``acknowledge`` or ``resolve``. ``dedup_key``: at most 255
  characters; required for acknowledge and resolve; a trigger without one gets
  a generated key.
* trigger needs ``payload`` with ``summary`` (at most 1024 characters),
  ``source`` and ``severity`` (critical, error, warning, info); optional
  ``timestamp`` (ISO 8601), ``component``, ``group``, ``class`` (strings) and
  ``custom_details`` (object). ``links`` is a list of objects with ``href``,
  ``images`` a list of objects with ``src``.
* Accepted: 202 ``{"status": "success", "message": "Event processed",
  "dedup_key": ...}``. Rejected: 400 ``{"status": "invalid event", "message":
  "Event object is invalid", "errors": [...]}``.

Alerts follow PagerDuty's de-duplication: a trigger opens an alert, or is
logged on the open alert with the same dedup_key and routing key;
acknowledge/resolve apply to the open alert and are dropped (still 202) when
there is none; after a resolve the same dedup_key opens a NEW alert.

Recorded: ``events`` (accepted event bodies), ``rejected`` (``(status, body,
errors)``), ``dropped`` (accepted but matched no open alert), ``alerts``
(dedup_key -> list of alerts, oldest first; each with ``status`` and
``history``) and ``requests`` (every request's monotonic time). Faults:
:meth:`fail_next` and ``delay``.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from aiohttp import web

from testkit.loopback import LoopbackServer

MAX_BODY = 512 * 1024
MAX_SUMMARY = 1024
MAX_DEDUP_KEY = 255
ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
_ALNUM = re.compile(r"^[A-Za-z0-9]+$")
_ISO8601 = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$")


def _is_iso8601(value: Any) -> bool:
    if not isinstance(value, str) or not _ISO8601.match(value):
        return False
    text = value.replace("Z", "+00:00")
    if re.search(r"[+-]\d{4}$", text):  # +0000 -> +00:00
        text = text[:-2] + ":" + text[-2:]
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class PagerDutyTestServer(LoopbackServer):
    """The PagerDuty Events API v2 alert endpoint, served on 127.0.0.1."""

    url_path = "/v2/enqueue"  # start() returns the events URL
    ROUTING_KEY = "R0UT1NGKEYALERTDTEST0000000000A1"  # 32 alphanumeric characters

    def __init__(self, routing_keys: Iterable[str] | None = None, *, delay: float = 0.0):
        super().__init__(delay=delay)
        self.routing_keys = set(routing_keys) if routing_keys is not None else {self.ROUTING_KEY}
        self.events: list[dict] = []
        self.rejected: list[tuple[int, Any, list[str]]] = []
        self.dropped: list[dict] = []
        self.alerts: dict[str, list[dict]] = {}
        self.requests: list[float] = []
        self._faults: list[int] = []
        self._alert_seq = 0

    # ------------------------------------------------------------ lifecycle

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY * 2)
        app.router.add_route("*", "/v2/enqueue", self._handle)
        return app

    # ------------------------------------------------------------ test controls

    def fail_next(self, status: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` requests with ``status`` (429, 5xx or 400) without processing them."""
        self._faults.extend([status] * count)

    def key_for(self, dedup_key: str) -> str:
        """The dedup key as sent: ``INC-7`` also finds alertd's installation-scoped ``<id>:INC-7``."""
        if dedup_key in self.alerts or any(e.get("dedup_key") == dedup_key for e in self.events):
            return dedup_key
        scoped = [k for k in list(self.alerts) if k.rpartition(":")[2] == dedup_key]
        return scoped[0] if len(scoped) == 1 else dedup_key

    def open_alert(self, dedup_key: str, routing_key: str | None = None) -> dict | None:
        """The open (triggered or acknowledged) alert for ``dedup_key``, if any."""
        for alert in reversed(self.alerts.get(self.key_for(dedup_key), [])):
            if alert["status"] != "resolved" and (routing_key is None or alert["routing_key"] == routing_key):
                return alert
        return None

    def status_of(self, dedup_key: str) -> str | None:
        """Status of the latest alert for ``dedup_key`` (``None`` when never triggered)."""
        alerts = self.alerts.get(self.key_for(dedup_key))
        return alerts[-1]["status"] if alerts else None

    def events_for(self, dedup_key: str) -> list[dict]:
        key = self.key_for(dedup_key)
        return [e for e in list(self.events) if e.get("dedup_key") == key]

    # ------------------------------------------------------------ HTTP

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append(time.monotonic())
        await self.wait_delay()
        if self._faults:
            return self._fault(self._faults.pop(0))
        if request.method != "POST":
            return web.json_response({"status": "invalid request", "message": "Method Not Allowed"},
                                     status=405, headers={"Allow": "POST"})
        raw = await request.read()
        if len(raw) > MAX_BODY:
            return self._reject(400, raw, ["Event object is too large (maximum is 512 KB)"])
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return self._reject(400, raw, ["Event object is not valid JSON"])
        if not isinstance(body, dict):
            return self._reject(400, body, ["Event object must be a JSON object"])
        errors = self._validate(body)
        if errors:
            return self._reject(400, body, errors)
        if body["routing_key"] not in self.routing_keys:
            return self._reject(400, body, ["Invalid routing key"])
        dedup_key = body.get("dedup_key") or uuid.uuid4().hex
        event = dict(body, dedup_key=dedup_key)
        self.events.append(event)
        self._apply(event)
        return web.json_response({"status": "success", "message": "Event processed", "dedup_key": dedup_key},
                                 status=202)

    def _fault(self, status: int) -> web.Response:
        if status == 429:
            return web.json_response({"status": "throttle event",
                                      "message": "Requests for this service are arriving too quickly. "
                                                 "Please retry later."}, status=429)
        if status == 400:
            return web.json_response({"status": "invalid event", "message": "Event object is invalid",
                                      "errors": ["Injected failure"]}, status=400)
        return web.json_response({"status": "error", "message": "Internal Server Error"}, status=status)

    def _reject(self, code: int, body: Any, errors: list[str], *, status: str = "invalid event",
                message: str = "Event object is invalid") -> web.Response:
        self.rejected.append((code, body, errors))
        return web.json_response({"status": status, "message": message, "errors": errors}, status=code)

    # ------------------------------------------------------------ validation

    @staticmethod
    def _validate(body: dict) -> list[str]:
        errors: list[str] = []
        key = body.get("routing_key")
        if _blank(key):
            errors.append("'routing_key' is missing or blank")
        elif not isinstance(key, str):
            errors.append("'routing_key' must be a string")
        else:
            if len(key) != 32:
                errors.append("Length of 'routing_key' is incorrect (should be 32 characters)")
            if not _ALNUM.match(key):
                errors.append("'routing_key' cannot contain non-alphanumeric characters.")
        action = body.get("event_action")
        if _blank(action):
            errors.append("'event_action' is missing or blank")
        elif action not in ACTIONS:
            errors.append("'event_action' must be one of: trigger, acknowledge, resolve")
        dedup = body.get("dedup_key")
        if dedup is not None:
            if not isinstance(dedup, str):
                errors.append("'dedup_key' must be a string")
            elif len(dedup) > MAX_DEDUP_KEY:
                errors.append(f"'dedup_key' is too long (maximum is {MAX_DEDUP_KEY} characters)")
        if action in ("acknowledge", "resolve") and _blank(dedup):
            errors.append("'dedup_key' is missing or blank")
        if action == "trigger":
            errors += PagerDutyTestServer._validate_payload(body.get("payload"))
        for name, required in (("links", "href"), ("images", "src")):
            if name not in body or body[name] is None:
                continue
            items = body[name]
            if not isinstance(items, list):
                errors.append(f"'{name}' must be an array")
                continue
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    errors.append(f"'{name}[{i}]' must be an object")
                elif _blank(item.get(required)) or not isinstance(item.get(required), str):
                    errors.append(f"'{name}[{i}].{required}' is missing or blank")
        return errors

    @staticmethod
    def _validate_payload(payload: Any) -> list[str]:
        if payload is None:
            return ["'payload' is missing or blank"]
        if not isinstance(payload, dict):
            return ["'payload' must be an object"]
        errors = []
        for name in ("summary", "source", "severity"):
            if _blank(payload.get(name)):
                errors.append(f"'payload.{name}' is missing or blank")
            elif not isinstance(payload[name], str):
                errors.append(f"'payload.{name}' must be a string")
        summary = payload.get("summary")
        if isinstance(summary, str) and len(summary) > MAX_SUMMARY:
            errors.append(f"'payload.summary' is too long (maximum is {MAX_SUMMARY} characters)")
        severity = payload.get("severity")
        if isinstance(severity, str) and severity.strip() and severity not in SEVERITIES:
            errors.append("'payload.severity' must be one of: critical, error, warning, info")
        if payload.get("timestamp") is not None and not _is_iso8601(payload["timestamp"]):
            errors.append("'payload.timestamp' is not a valid ISO 8601 timestamp")
        for name in ("component", "group", "class"):
            if payload.get(name) is not None and not isinstance(payload[name], str):
                errors.append(f"'payload.{name}' must be a string")
        if payload.get("custom_details") is not None and not isinstance(payload["custom_details"], dict):
            errors.append("'payload.custom_details' must be an object")
        return errors

    # ------------------------------------------------------------ alert state

    def _apply(self, event: dict) -> None:
        key, action, routing_key = event["dedup_key"], event["event_action"], event["routing_key"]
        now = time.monotonic()
        alert = self.open_alert(key, routing_key)
        if action == "trigger":
            if alert is None:
                self._alert_seq += 1
                payload = event["payload"]
                alert = {
                    "id": f"Q{self._alert_seq:013d}",
                    "dedup_key": key,
                    "routing_key": routing_key,
                    "status": "triggered",
                    "summary": payload["summary"],
                    "severity": payload["severity"],
                    "source": payload["source"],
                    "payload": payload,
                    "created_at": now,
                    "history": [],
                    "events": [],
                }
                self.alerts.setdefault(key, []).append(alert)
            else:  # logged on the open alert; an acknowledged alert stays acknowledged
                alert["payload"] = event["payload"]
                alert["summary"] = event["payload"]["summary"]
                alert["severity"] = event["payload"]["severity"]
        elif alert is None:
            self.dropped.append(event)
            return
        elif action == "acknowledge":
            alert["status"] = "acknowledged"
        else:
            alert["status"] = "resolved"
        alert["history"].append({"action": action, "status": alert["status"], "at": now})
        alert["events"].append(event)
