"""Log setup: plain text for people, JSON lines for log pipelines, and no secret in either.

The one handler is on the root logger, so every logger's records (alertd's, aiohttp's access and server
logs, asyncio's, the clients') reach it and pass its redaction filter (alertd/core/redaction.py) first.
"""
from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Iterable

from alertd.core.redaction import RedactingFilter, Redactor

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_text:  # the redaction filter's text
            out["exc"] = record.exc_text
        elif record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(fmt: str = "text", level: str = "info", secrets: Iterable[str] = ()) -> Redactor:
    """One handler on the root logger, behind the redaction filter; returns the redactor, which a reload tells
    the secrets it read (``Redactor.remember``)."""
    redactor = Redactor(secrets)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return redactor
