"""``alertd serve --record FILE``: append every accepted webhook to a JSON-lines file for ``alertd replay``.

Each line is ``{"received_at": "<RFC 3339>", "body": <the webhook as received>}``.
Writes go to a buffer that is flushed at most once a second (or when it is
large), so recording costs the request path a memory copy, not a disk write; a
crash can lose the last second of the recording, never an alert (the inbox has
those).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from aiohttp import web

from alertd.core.model import iso

log = logging.getLogger(__name__)
FLUSH_SECONDS = 1.0
FLUSH_BYTES = 256 * 1024


class Recorder:
    def __init__(self, path: str | Path, *, flush_seconds: float = FLUSH_SECONDS):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "ab", buffering=FLUSH_BYTES)  # noqa: SIM115
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self.written = 0
        self.errors = 0

    def write(self, received_at: datetime, raw_body: bytes | str) -> None:
        """Append one webhook; ``raw_body`` is the JSON document exactly as received."""
        body = raw_body.encode() if isinstance(raw_body, str) else bytes(raw_body)
        body = body.strip()
        if b"\n" in body or b"\r" in body:  # pretty-printed JSON: one line per record
            body = json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode()
        line = b'{"received_at":' + json.dumps(iso(received_at)).encode() + b',"body":' + body + b"}\n"
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.write(line)
                self.written += 1
                now = time.monotonic()
                if now - self._last_flush >= self._flush_seconds:
                    self._file.flush()
                    self._last_flush = now
            except OSError as exc:  # the recording is a debugging aid: never fail the webhook for it
                self._failed(exc)

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                except OSError as exc:
                    self._failed(exc)
                self._last_flush = time.monotonic()

    def _failed(self, exc: OSError) -> None:
        self.errors += 1
        if self.errors == 1 or self.errors % 1000 == 0:
            log.warning("cannot write the webhook recording %s (%d failures): %s", self.path, self.errors, exc)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:
                    self._failed(exc)
                self._file = None


def attach_recorder(app: web.Application, svc: Any, path: str | Path) -> Recorder:
    """Give the service a recorder (the webhook handler writes to ``svc.recorder``) and flush it in the background."""
    import asyncio

    recorder = Recorder(path)
    svc.recorder = recorder
    tasks: list[asyncio.Task[None]] = []

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            recorder.flush()

    async def start(_: web.Application) -> None:
        tasks.append(asyncio.get_running_loop().create_task(flusher(), name="alertd-recorder"))

    async def stop(_: web.Application) -> None:
        for task in tasks:
            task.cancel()
        recorder.close()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return recorder
