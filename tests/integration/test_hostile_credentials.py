"""Credentials as an attacker sends them, against a real ``alertd serve`` (receiver and API tokens from files,
a basic user, Slack signing), over raw sockets from several loopback addresses (each its own client for the
throttle):

- undecodable bytes in any header, on any route, never give a 5xx; in Authorization they are a 401 counted
  as ``malformed`` and throttled like a wrong token;
- token guessing on the webhook gets 429 after the limit, and the right token is still taken, from that
  client too (a guesser behind Alertmanager's address never costs it a webhook);
- every secret sent through every path that logs a request head (aiohttp's refusal of a bare-LF head, which
  logs the raw bytes; its other parse errors; alertd's own failure lines), with the log at DEBUG, reaches no
  log line.
"""
from __future__ import annotations

import base64
import http.client
import socket
from datetime import datetime, timezone
from typing import NamedTuple

import pytest

from testkit.alertd_proc import AlertdProcess
from testkit.webhooks import dumps, node_webhook

HOOK = "/api/v1/alerts/alertmanager"
RECEIVER_TOKEN = "rcv-7d2e9a41c6b8f0153e9d"
ADMIN_TOKEN = "adm-3f8b1e6c9a2d4075b8e1"
BASIC_PASSWORD = "bsc-pw-62e0a9d14c7f"
SIGNING_SECRET = "c4ca4238a0b923820dcc509a6f75849b"
SLACK_TOKEN = "xoxb-7731-4410-kP2vQ9sL4mX8"
SECRETS = {"receiver token": RECEIVER_TOKEN, "admin token": ADMIN_TOKEN, "basic password": BASIC_PASSWORD,
           "signing secret": SIGNING_SECRET, "slack token": SLACK_TOKEN}
BASIC = base64.b64encode(f"ops:{BASIC_PASSWORD}".encode()).decode()
AT = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)
PROXY = "127.0.0.3"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> AlertdProcess:
    work = tmp_path_factory.mktemp("hostile")
    (work / "receiver.token").write_text(RECEIVER_TOKEN + "\n")
    (work / "admin.token").write_text(ADMIN_TOKEN + "\n")
    proc = AlertdProcess(work, {
        "log": {"level": "debug"},
        "receiver": {"auth": {"bearer_token_file": str(work / "receiver.token")}},
        # 127.0.0.3 is a trusted proxy (X-Forwarded-For, -Proto and -User believed from it): the header test
        # sends from there, so those headers' parsing is tried too.
        "api": {"trusted_proxies": [PROXY + "/32"],
                "auth": {"tokens": [{"name": "admin", "role": "admin", "token_file": str(work / "admin.token")}],
                         "basic": {"username": "ops", "password": BASIC_PASSWORD, "role": "read"},
                         "trusted_proxy": {"header": "X-Forwarded-User", "from": [PROXY + "/32"]}}},
        "notify": {"slack": {"token": SLACK_TOKEN, "signing_secret": SIGNING_SECRET,
                             "base_url": "http://127.0.0.1:9/api/"}},
    }, serve_args=["--receivers", "0"])
    proc.start()
    yield proc
    proc.stop()


class Answer(NamedTuple):
    status: int  # 0: the connection closed without an answer
    headers: dict[str, str]


def send(server: AlertdProcess, data: bytes, source: str = "127.0.0.1", timeout: float = 10.0) -> Answer:
    """One request's bytes as given, from ``source``, and the answer's status line and headers."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout, source_address=(source, 0)) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except (http.client.HTTPException, OSError):
            return Answer(0, {})
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()})


def head(method: str, path: str, headers: list[tuple[str, bytes]], body: bytes = b"", eol: bytes = b"\r\n") -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1"]
    lines += [name.encode() + b": " + value for name, value in headers]
    lines.append(b"Content-Length: %d" % len(body))
    return eol.join(lines) + eol + eol + body


def webhook_body(i: int = 0) -> bytes:
    return dumps(node_webhook("hostile", f"hostile-node-{i}", starts_at=AT))


def auth_failures(server: AlertdProcess, surface: str, reason: str) -> float:
    return server.metrics().get(f'alertd_auth_failures_total{{reason="{reason}",surface="{surface}"}}', 0.0)


# ----- no 5xx from a header -----

def test_undecodable_bearer_is_a_401_counted_as_malformed(server):
    before = {s: auth_failures(server, s, "malformed") for s in ("receiver", "api")}
    bad = [("Authorization", b"Bearer \xff\xfe"), ("Content-Type", b"application/json")]
    hook = send(server, head("POST", HOOK, bad, webhook_body()), source="127.0.0.2")
    api = send(server, head("GET", "/api/v1/incidents", bad), source="127.0.0.2")
    assert (hook.status, api.status) == (401, 401)
    assert auth_failures(server, "receiver", "malformed") == before["receiver"] + 1
    assert auth_failures(server, "api", "malformed") == before["api"] + 1


ROUTES = [("POST", HOOK), ("GET", "/api/v1/incidents"), ("POST", "/api/v1/incidents/INC-1/ack"),
          ("POST", "/api/v1/incidents/INC-1/remediation/approve"), ("POST", "/-/reload"),
          ("POST", "/api/v1/slack/actions"), ("GET", "/ui/"), ("GET", "/ui/login"), ("POST", "/ui/login"),
          ("GET", "/healthz"), ("GET", "/metrics")]
HEADERS = ["Authorization", "X-Forwarded-User", "X-Forwarded-For", "X-Forwarded-Proto", "Cookie", "Origin",
           "Sec-Fetch-Site", "Referer", "X-Slack-Signature", "X-Slack-Request-Timestamp", "Content-Type", "Accept",
           "Host"]


@pytest.mark.parametrize("name", HEADERS)
def test_no_header_value_gives_a_5xx_on_any_route(server, name):
    for value in (b"\xff\xfe", b"Bearer \xc3\x28\xa0\xa1", b"v0=\xe2\x82"):
        for method, path in ROUTES:
            headers = [(name, value)] if name != "Host" else []
            data = head(method, path, headers, b"{}")
            if name == "Host":
                data = data.replace(b"Host: 127.0.0.1", b"Host: " + value)
            answer = send(server, data, source=PROXY)
            assert 0 < answer.status < 500, (name, value, method, path, answer)
    assert server.alive()


# ----- the webhook's throttle -----

def test_webhook_token_guessing_gets_429_after_the_limit(server):
    guesser, alertmanager = "127.0.0.4", "127.0.0.5"
    body = webhook_body(1)
    statuses = [send(server, head("POST", HOOK, [("Authorization", f"Bearer guess-{i:04d}-abcdef".encode()),
                                                 ("Content-Type", b"application/json")], body), guesser).status
                for i in range(11)]
    assert statuses == [401] * 10 + [429]
    right = [("Authorization", f"Bearer {RECEIVER_TOKEN}".encode()), ("Content-Type", b"application/json")]
    # The right token from the throttled address is taken: a guesser behind Alertmanager's NAT never costs it
    assert send(server, head("POST", HOOK, right, body), guesser).status == 200
    assert send(server, head("POST", HOOK, right, body), alertmanager).status == 200
    assert auth_failures(server, "receiver", "throttled") >= 1
    assert server.metrics()['alertd_webhooks_rejected_total{reason="throttled"}'] >= 1


# ----- no secret in a log line -----

def _secret_heads() -> list[bytes]:
    """Every secret in every header that carries one, on the paths that log a request head."""
    json_type = ("Content-Type", b"application/json")
    carriers = [("Authorization", f"Bearer {RECEIVER_TOKEN}"), ("Authorization", f"Bearer {ADMIN_TOKEN}"),
                ("Authorization", f"Basic {BASIC}"), ("Authorization", ADMIN_TOKEN),
                ("Cookie", f"alertd_session={ADMIN_TOKEN}"), ("X-Slack-Signature", f"v0={SIGNING_SECRET}"),
                ("X-Api-Key", SLACK_TOKEN), ("X-Forwarded-User", BASIC_PASSWORD)]
    heads = []
    for name, value in carriers:
        header = (name, value.encode())
        for path in (HOOK, "/api/v1/incidents", "/api/v1/slack/actions"):
            heads.append(head("POST", path, [header, json_type], webhook_body(), eol=b"\n"))  # bare LF: aiohttp logs the head
            heads.append(head("POST", path, [header, json_type, ("X-Bad", b"a\x01b")], b"{}"))  # a control character
            heads.append(head("POST", path, [header, json_type], b"{}"))  # a refusal alertd logs itself
        heads.append(head("GET", f"/api/v1/incidents?token={value}", [header]))
    heads.append(head("POST", HOOK, [("Authorization", f"Bearer {RECEIVER_TOKEN}".encode()), json_type],
                      webhook_body(2)))  # and one accepted
    return heads


def test_no_secret_reaches_any_log_line_at_debug(server):
    for i, data in enumerate(_secret_heads()):
        assert send(server, data, source=f"127.0.1.{i % 200 + 1}").status != 0
    # Every line was written before its answer went out (stderr is line-buffered): nothing to wait for.
    log = server.log_path.read_text(errors="replace")
    assert "Error handling request" in log  # aiohttp's refusals, with the heads, were logged
    assert "authentication failed" in log  # and alertd's own failure lines
    for what, secret in {**SECRETS, "basic credentials": BASIC, "signature": f"v0={SIGNING_SECRET}"}.items():
        leaks = [line for line in log.splitlines() if secret in line]
        assert not leaks, f"{what} logged: {[line[:300] for line in leaks[:3]]}"
