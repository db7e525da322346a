"""What ``alertd check`` says of a ``correlation.storm`` section: names that make an event never match, or
match every node alike. Warnings, not errors: the rules still load."""
from __future__ import annotations

import re
from typing import Any

from alertd.core import json_types
from alertd.core.matchers import MatcherError, parse_matchers
from alertd.core.vocabulary import SIGNAL_KINDS
from alertd.core.yamlio import Path_
from alertd.engine.storm import EVENT_FIELDS

STORM: Path_ = ("correlation", "storm")


def storm_warnings(storm: json_types.JSONObject) -> list[tuple[Path_, str]]:
    """Storm signals, event and follower matchers naming a signal kind that does not exist never match; an
    event keyed by a field no node incident has gives every node '' there, one event for all of them."""
    out: list[tuple[Path_, str]] = []
    kinds = ", ".join(sorted(SIGNAL_KINDS))
    for j, kind in enumerate(json_types.as_array(storm.get("signals"))):
        if kind not in SIGNAL_KINDS:
            out.append((STORM + ("signals", j), f"storm signal {kind!r} is not a signal kind ({kinds})"))
    places: list[tuple[Path_, Any]] = [(STORM + ("followers",), storm.get("followers"))]
    events = storm.get("events")
    fields = ", ".join(sorted(EVENT_FIELDS))
    for i, ev in enumerate(events if isinstance(events, list) else []):
        if not isinstance(ev, dict):
            continue
        places.append((STORM + ("events", i, "match"), ev.get("match")))
        for j, by in enumerate(json_types.as_array(ev.get("by"))):
            if isinstance(by, str) and by not in EVENT_FIELDS:
                out.append((STORM + ("events", i, "by", j), f"storm event {ev.get('name')!r} is keyed by {by!r}, "
                                                             f"which is no storm field ({fields}): every node "
                                                             "incident has '' there"))
    for path, texts in places:
        for j, text in enumerate(texts if isinstance(texts, list) else []):
            for unknown in _unknown_kinds(text):
                out.append((path + (j,), f"matcher {text!r} names signal kind {unknown!r}, which does not exist "
                                         f"({kinds})"))
    return out


def _unknown_kinds(text: Any) -> list[str]:
    """The signal kinds a ``signal`` matcher names that are no kind: each word of a plain alternation
    (``xid|ecc``), or the whole pattern when it is another regex that matches no kind."""
    try:
        matchers = parse_matchers([text])
    except (MatcherError, TypeError):
        return []  # the schema check reports it
    out: list[str] = []
    for m in matchers:
        if m.name != "signal":
            continue
        if m.op in ("=", "!=") or re.fullmatch(r"[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*", m.value):
            out += [v for v in (m.value.split("|") if m.op in ("=~", "!~") else [m.value]) if v not in SIGNAL_KINDS]
        elif m.regex is not None and not any(m.regex.fullmatch(k) for k in SIGNAL_KINDS):
            out.append(m.value)
    return out
