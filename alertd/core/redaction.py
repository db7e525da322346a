"""No secret in a log line, at any level: a filter for the log handlers that every logger's records pass.

aiohttp logs the raw head of a request it refuses (with its ``Authorization``
line) at ERROR, its access log can name any header, and a library's exception
text may hold a URL with a password in it. Installed on the root logger's
handlers (alertd/cli/logging_setup.py), the filter sees every record that
reaches a log line, alertd's and its libraries', and rewrites the message, the
exception text and the stack before any formatter reads them:

- the values of the headers that carry credentials (``Authorization``,
  ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie``, Slack's signature and
  timestamp headers, ``X-Api-Key``), wherever a head is printed (raw bytes, a
  repr, JSON), with every line such a value is folded onto (obs-fold: a line
  that starts with a space or a tab continues the one before), and every
  cookie's value in a cookie header, whatever an earlier cookie holds (a quote
  ends the header's value in a repr, not in a raw head);
- Bearer and Basic credentials, Slack signatures (``v0=<hex>``) and Slack
  tokens (``xoxb-...``) anywhere in the text;
- ``password=...``, ``token: ...`` and the like, and the password of a URL;
- every secret the configuration holds (alertd.config.secrets.configured_secrets),
  as given and URL-encoded.

The rules are regular expressions over text: a secret logged in another encoding
than those (base64 of a configured token, say) is not recognised.
"""
from __future__ import annotations

import logging
import re
from typing import Callable, Iterable
from urllib.parse import quote

REDACTED = "[redacted]"
MIN_LITERAL = 6  # shorter configured values are not searched for literally: they would match everywhere

_END = r"""(?:(?!\\[rn])[^\r\n"'<>])*"""  # a header value: to the end of its line (raw, or \r \n in a repr)
_HEADERS = (r"(?:proxy-)?authorization|(?:set-)?cookie|x-slack-signature|x-slack-request-timestamp|x-api-key|"
            r"x-auth-token")
_KEY_NAMES = ("password", "passwd", "secret", "token", "api_key", "apikey", "routing_key")
_NOT_DONE = r"(?!\[redacted\])"
_HEADER_NAMES = ("authorization", "cookie", "x-slack-signature", "x-slack-request-timestamp", "x-api-key",
                 "x-auth-token")
_KEYED = re.compile(r"\b([\w-]+)(['\"]?\s*[=:]\s*['\"]?)" + _NOT_DONE + r"([^\s'\"&,;)}\]]+)")


def _keyed(match: re.Match[str]) -> str:
    """``<...password|secret|token...>=value``: the value redacted, any other key=value left alone."""
    key = match.group(1).lower()
    return match.group(1) + match.group(2) + REDACTED if key.endswith(_KEY_NAMES) else match.group(0)


Replacement = str | Callable[[re.Match[str]], str]
# (words one of which the lowercased text must hold for the rule to be tried, the rule, its replacement): the
# check is one pass over the text, and most log lines hold none of the words.
Rule = tuple[tuple[str, ...], re.Pattern[str], Replacement]
_RULES: tuple[Rule, ...] = (
    (_HEADER_NAMES, re.compile(r"(?i)\b(" + _HEADERS + r")(['\"]?\s*[:=]\s*['\"]?)(?=[^\s'\"])" + _NOT_DONE + _END),
     r"\1\2" + REDACTED),
    (("bearer", "basic"), re.compile(r"(?i)\b(bearer|basic)\s+(?=[A-Za-z0-9._~+/-]*[0-9+/=_-])[A-Za-z0-9._~+/-]{8,}=*"),
     r"\1 " + REDACTED),
    (("cookie",), re.compile(r"(?i)(\bcookie['\"]?\s*[:=]\s*['\"]?|;\s*)([^=;\s'\"]+=)" + _NOT_DONE
                             + r"(\"[^\"]*\"|[^;\s'\"\\]*)"), r"\1\2" + REDACTED),
    (("v0=",), re.compile(r"\bv0=[0-9a-fA-F]{16,}"), "v0=" + REDACTED),
    (("xox", "xapp-"), re.compile(r"\bx(?:ox[abposre]|app)-[A-Za-z0-9-]{6,}"), REDACTED),
    (_KEY_NAMES, _KEYED, _keyed),
    (("://",), re.compile(r"(://[^/\s:@'\"]+:)[^@\s/'\"]+@"), r"\1" + REDACTED + "@"),
)
_LINES = re.compile(r"(\r?\n|\\r\\n|\\n)")  # raw line ends, and a repr's escaped ones: no rule crosses one
_CREDENTIAL_LINE = re.compile(r"(?i)\b(?:" + _HEADERS + r")['\"]?\s*:")  # a head's line naming a credential header
_FOLDED = re.compile(r"^((?:[ \t]|\\t)+)\S.*")  # a line that continues the one before (obs-fold)


def _by_rules(line: str, rules: list[Rule]) -> str:
    """One line through the rules whose words it holds (a 7 KB body on one line holds none, usually)."""
    lower = line.lower()
    for words, pattern, replacement in rules:
        if any(word in lower for word in words):
            line = pattern.sub(replacement, line)
    return line


_SECRET_NAME = re.compile(r"(?i)(?:" + _HEADERS + r"|[\w-]*(?:" + "|".join(_KEY_NAMES) + "))")


class Redactor:
    """The rules above, and the literal secrets it was told (``remember``: at start and at each reload)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets: set[str] = set()
        self._literal: re.Pattern[str] | None = None
        self.remember(secrets)

    def remember(self, secrets: Iterable[str]) -> None:
        """Add secrets (a rotated-away token stays one: it may still be tried, and logged)."""
        for secret in secrets:
            for form in (secret, quote(secret, safe="")):
                if len(form) >= MIN_LITERAL:
                    self._secrets.add(form)
        if self._secrets:  # longest first, so a secret holding a shorter one is redacted whole
            self._literal = re.compile("|".join(re.escape(s) for s in sorted(self._secrets, key=len, reverse=True)))

    def redact(self, text: str) -> str:
        if self._literal is not None:
            text = self._literal.sub(REDACTED, text)
        lower = text.lower()
        rules = [rule for rule in _RULES if any(word in lower for word in rule[0])]
        if not rules:  # most lines
            return text
        heads = rules[0] is _RULES[0]  # the text names a credential header: its value may go on over lines
        out, folded = [], False
        for i, line in enumerate(_LINES.split(text)):
            if i % 2:  # a line end
                out.append(line)
            elif folded and _FOLDED.match(line):
                out.append(_FOLDED.sub(r"\1" + REDACTED, line))
            else:
                folded = heads and _CREDENTIAL_LINE.search(line) is not None
                out.append(_by_rules(line, rules))
        return "".join(out)

    def scrub(self, value: object) -> object:
        """A record's extra field: text redacted; in a mapping (aiohttp's access log passes the request's
        headers) the value of a credential's name is dropped whole."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: REDACTED if isinstance(k, str) and _SECRET_NAME.fullmatch(k) else self.scrub(v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value


_PLAIN = logging.Formatter()
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message, exception and stack text are redacted in place (every handler
    after it, and every formatter, sees only the redacted text); extra fields too."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redact = self.redactor.redact
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's to report; keep the raw text
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _PLAIN.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _STANDARD:
                setattr(record, key, self.redactor.scrub(value))
        return True


__all__ = ["REDACTED", "RedactingFilter", "Redactor"]
