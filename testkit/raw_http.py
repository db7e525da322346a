"""HTTP/1.1 spoken byte by byte on raw loopback sockets, answers read with httptools' response parser: for
tests of what the web server does with exactly the bytes a client sends (keep-alive, pipelining, split and
trickled writes, heads over the limits)."""
from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

import httptools

PATH = "/api/v1/alerts/alertmanager"


@dataclass
class Answer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def from_lane(self) -> bool:
        return "server" not in self.headers

    def json(self) -> dict:
        return json.loads(self.body)


class Reader:
    """httptools' response parser, collecting complete answers (1xx interim answers are kept apart)."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.done: list[Answer] = []
        self.interim: list[Answer] = []
        self.current = Answer()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.current.headers[name.decode().lower()] = value.decode()

    def on_headers_complete(self) -> None:
        self.current.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.current.body += body

    def on_message_complete(self) -> None:
        (self.interim if 100 <= self.current.status < 200 else self.done).append(self.current)
        self.current = Answer()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_answers(sock: socket.socket, n: int, reader: Reader | None = None, timeout: float = 10.0) -> list[Answer]:
    """Read until ``n`` final answers arrived or the peer closed (bounded by ``timeout``)."""
    reader = reader or Reader()
    deadline = time.monotonic() + timeout
    while len(reader.done) < n and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        reader.parser.feed_data(data)
    return reader.done


def closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def request(body: bytes, *, token: str | None, method: str = "POST", path: str = PATH,
            version: str = "1.1", content_type: str | None = "application/json", extra: str = "",
            length: int | None = None, host: str = "127.0.0.1") -> bytes:
    head = f"{method} {path} HTTP/{version}\r\nHost: {host}\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    if length is not None or "transfer-encoding" not in extra.lower():
        head += f"Content-Length: {len(body) if length is None else length}\r\n"
    return (head + extra + "\r\n").encode() + body
