"""No secret in a log line: the redaction rules on the shapes logs really take, the filter on every logger's
records (aiohttp's access and server loggers among them) at DEBUG, and the list of configured secrets."""
from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Iterator

import pytest
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.test_utils import make_mocked_request
from aiohttp.web_log import AccessLogger
from multidict import CIMultiDict

from alertd.cli.logging_setup import setup_logging
from alertd.config.secrets import configured_secrets
from alertd.config.settings import load_config
from alertd.core.redaction import REDACTED, Redactor

TOKEN = "rcv-5e1b9c27d4a8f0634b1e"
API = "adm-0c9e4b7a2f5d8136e7a2"
SIGNING = "8f14e45fceea167a5a36dedd4bea2543"
SLACK = "xoxb-2024-11-0a1b2c3d4e5f"
SECRETS = [TOKEN, API, SIGNING, SLACK]
SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


@pytest.mark.parametrize("text", [
    # aiohttp's BadHttpMessage for a bare-LF head: the raw bytes, as a bytes repr
    "400, message:\n  Invalid header value char:\n\n    b'POST /api/v1/alerts/alertmanager HTTP/1.1\\nHost: x\\n"
    f"Authorization: Bearer {TOKEN}\\nContent-Length: 2'",
    f"<CIMultiDictProxy('Host': '127.0.0.1', 'Authorization': 'Bearer {API}', 'Cookie': 'alertd_session=abc')>",
    json.dumps({"headers": {"Authorization": f"Basic {API}", "X-Slack-Signature": SIGNATURE}}),
    f"POST /api/v1/slack/actions x-slack-signature: {SIGNATURE}\r\nX-Slack-Request-Timestamp: 1733461200\r\n",
    f"GET /api/v1/incidents?token={API}&limit=5 HTTP/1.1",
    f"connecting to postgresql://alertd:{API}@db:5432/alertd failed",
    f"chat.postMessage with {SLACK} answered invalid_auth",
    f"config: {{'signing_secret': '{SIGNING}', 'bearer_token': '{TOKEN}'}}",
])
def test_credentials_in_the_shapes_logs_take_are_redacted(text: str) -> None:
    out = Redactor().redact(text)  # no configured secrets: the rules alone
    assert REDACTED in out
    for secret in (*SECRETS, SIGNATURE[3:], "1733461200", "alertd_session=abc"):
        assert secret not in out, out


def test_configured_secrets_are_redacted_anywhere_also_url_encoded() -> None:
    odd = "p@ss/w0rd+with=chars"
    redactor = Redactor([TOKEN, odd, "short"])
    out = redactor.redact(f"unexpected value {TOKEN} in a body; ?q=p%40ss%2Fw0rd%2Bwith%3Dchars; {odd}")
    assert TOKEN not in out and odd not in out and "p%40ss" not in out
    assert redactor.redact("a short word") == "a short word"  # under MIN_LITERAL: not searched for


def test_ordinary_lines_are_left_alone() -> None:
    redactor = Redactor(SECRETS)
    for line in ("receiver authentication failed from 127.0.0.1: POST /api/v1/alerts/alertmanager: wrong token",
                 "api authentication failed from ::1: GET /-/reload: malformed credentials",
                 "unsupported authorization scheme (not Bearer or Basic)",
                 "webhook stored: 12 alerts, group {alertname=\"GPUXidError\"}"):
        assert redactor.redact(line) == line


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """The root logger as ``alertd serve`` sets it up (JSON, DEBUG), writing into a buffer."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    access = logging.getLogger("aiohttp.access")
    access_level = access.level
    stream = io.StringIO()
    setup_logging("json", "debug", SECRETS)
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    access.setLevel(logging.DEBUG)  # off by default; on here to show its lines are redacted too
    yield stream
    root.handlers[:] = saved
    root.setLevel(level)
    access.setLevel(access_level)


def test_every_logger_at_every_level_passes_the_filter(log_stream: io.StringIO) -> None:
    head = f"POST / HTTP/1.1\nAuthorization: Bearer {TOKEN}\nCookie: alertd_session={API}\n".encode()
    try:
        raise BadHttpMessage(f"Invalid header value char:\n\n    {head!r}")
    except BadHttpMessage as exc:
        logging.getLogger("aiohttp.server").error("Error handling request from %s", "127.0.0.1", exc_info=exc)
    logging.getLogger("alertd.web.auth").debug("headers %s", {"Authorization": f"Bearer {API}"})
    logging.getLogger("asyncio").warning("stack", stack_info=True, extra={"detail": f"token={SIGNING}"})
    logging.getLogger("slack_sdk.web").info(f"sending {SLACK}")
    request = make_mocked_request("POST", f"/api/v1/incidents?access_token={API}", headers=CIMultiDict({
        "Authorization": f"Bearer {TOKEN}", "Cookie": f"alertd_session={API}", "X-Slack-Signature": SIGNATURE}))
    fmt = '%a "%r" %s "%{Authorization}i" "%{Cookie}i" "%{X-Slack-Signature}i"'
    AccessLogger(logging.getLogger("aiohttp.access"), fmt).log(request, web.Response(status=401), 0.01)
    lines = log_stream.getvalue().splitlines()
    assert len(lines) == 5 and {json.loads(line)["logger"] for line in lines} >= {"aiohttp.server", "aiohttp.access"}
    assert "BadHttpMessage" in lines[0] and REDACTED in lines[0]
    for secret in (*SECRETS, SIGNATURE):
        assert not [line for line in lines if secret in line], secret


def test_the_text_format_redacts_exceptions_too(log_stream: io.StringIO) -> None:
    root = logging.getLogger()
    root.handlers[0].setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    try:
        raise ValueError(f"could not parse Authorization: Bearer {TOKEN}")
    except ValueError:
        logging.getLogger("aiohttp.web").exception("Unhandled exception")
    out = log_stream.getvalue()
    assert "ValueError" in out and TOKEN not in out


def test_every_secret_of_a_configuration_is_listed(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(f"{API}\n{API[::-1]}\n")
    (tmp_path / "config.yml").write_text(f"""
api:
  auth:
    tokens: [{{name: ops, role: admin, token_file: tokens}}]
    basic: {{username: alice, password: wonder-land-42}}
receiver: {{auth: {{bearer_token: {TOKEN}}}}}
notify:
  slack: {{token: {SLACK}, signing_secret: {SIGNING}}}
""")
    found = configured_secrets(load_config(tmp_path / "config.yml").raw)
    assert {API, API[::-1], TOKEN, SLACK, SIGNING, "wonder-land-42", "YWxpY2U6d29uZGVyLWxhbmQtNDI="} <= found
    assert "alice" not in found and "ops" not in found


SESSION = "kX3v9QmT0bWl7yRz2NcP5uHs8dJf1aGe4oLi6tYw0qB"  # 32 random bytes, urlsafe base64, as the UI sets it
FIRST_HALF, SECOND_HALF = TOKEN[:11], TOKEN[11:]


@pytest.mark.parametrize("text", [
    # a token folded onto a continuation line (obs-fold), as aiohttp prints the raw head it refuses
    "400, message:\n  Invalid header value char:\n\n    b'POST /api/v1/alerts/alertmanager HTTP/1.1\\r\\nHost: x\\r\\n"
    f"Authorization: Bearer {FIRST_HALF}\\r\\n {SECOND_HALF}\\r\\nContent-Length: 2\\r\\n\\r\\n'",
    f"POST /api/v1/incidents HTTP/1.1\nHost: x\nAuthorization: Bearer {FIRST_HALF}\n\t{SECOND_HALF}\nX-A: b\n",
    f"POST / HTTP/1.1\r\nX-Api-Key:\r\n {FIRST_HALF}\r\n  {SECOND_HALF}\r\n\r\n",
])
def test_a_credential_folded_over_several_header_lines_is_redacted_on_every_line(text: str) -> None:
    out = Redactor().redact(text)
    assert FIRST_HALF not in out and SECOND_HALF not in out, out
    assert "Host: x" in out or "POST / HTTP/1.1" in out  # the rest of the head stays readable


@pytest.mark.parametrize("text", [
    f'GET /ui/incidents HTTP/1.1\r\nCookie: theme="dark"; alertd_session={SESSION}\r\nHost: x\r\n',
    f"b'GET /ui HTTP/1.1\\r\\nCookie: a=\"1\"; b=2; alertd_session={SESSION}; c=3\\r\\n'",
    f"<CIMultiDictProxy('Host': 'x', 'Cookie': 'theme=\"dark\"; alertd_session={SESSION}')>",
    f'Set-Cookie: note="x"; alertd_session={SESSION}; HttpOnly',
])
def test_every_cookie_of_a_header_is_redacted_whatever_an_earlier_one_holds(text: str) -> None:
    out = Redactor().redact(text)
    assert SESSION not in out and SESSION[:12] not in out, out
