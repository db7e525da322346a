"""Label and field selectors as the Kubernetes API server parses and matches them.

Parsing raises :class:`~testkit.kube_resources.ApiError` 400 with the server's
messages; field selectors accept only the fields the real API supports for the kind.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from testkit.kube_resources import ApiError, Resource

COMMON_FIELDS = ("metadata.name", "metadata.namespace")
# Field selectors the real API server supports, by kind.
FIELD_SELECTORS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
            "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "ReplicaSet": ("status.replicas",),
    "Job": ("status.successful",),
    "Secret": ("type",),
}


_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_REQ = re.compile(
    r"^(?P<neg>!)?(?P<key>[^\s=!<>(),]+)"
    r"(?:(?P<op>==|=|!=|>|<)(?P<val>[^\s=!<>(),]*)|\s+(?P<setop>in|notin)\s*\((?P<vals>[^()]*)\))?$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_label_selector(selector: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """Requirements ``(key, op, values)``; raises ApiError 400 like the API server."""
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    if not selector.strip():
        return reqs
    for raw in _split_top_level(selector):
        part = raw.strip()
        # normalise "key = value" spacing the way the server's lexer does
        part = re.sub(r"\s*(==|!=|=|>|<)\s*", r"\1", part)
        m = _REQ.match(part)
        if not m or (m["neg"] and (m["op"] or m["setop"])):
            raise ApiError(400, "BadRequest", f"unable to parse requirement: found '{raw.strip()}', "
                                              "expected: identifier, '=', '!=', 'in', 'notin' or '!'")
        key = m["key"]
        if not _LABEL_KEY.match(key):
            raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label key \"{key}\"")
        if m["neg"]:
            reqs.append((key, "!", ()))
        elif m["op"]:
            op = "=" if m["op"] == "==" else m["op"]
            val = m["val"]
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", val or ""):
                    raise ApiError(400, "BadRequest",
                                   "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                                   "an integer")
            elif not _LABEL_VALUE.match(val):
                raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label value: \"{val}\"")
            reqs.append((key, op, (val,)))
        elif m["setop"]:
            vals = tuple(v.strip() for v in m["vals"].split(",")) if m["vals"].strip() else ()
            if not vals:
                raise ApiError(400, "BadRequest",
                               "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty")
            bad = next((v for v in vals if not _LABEL_VALUE.match(v)), None)
            if bad is not None:
                raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label value: \"{bad}\"")
            reqs.append((key, m["setop"], vals))
        else:
            reqs.append((key, "exists", ()))
    return reqs


def labels_match(reqs: Sequence[tuple[str, str, tuple[str, ...]]], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, vals in reqs:
        present = key in labels
        value = labels.get(key)
        if op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        elif op == "=":
            ok = present and value == vals[0]
        elif op == "!=":
            ok = not present or value != vals[0]
        elif op == "in":
            ok = present and value in vals
        elif op == "notin":
            ok = not present or value not in vals
        else:  # > <
            try:
                num = int(value) if present else None
            except ValueError:
                num = None
            ok = num is not None and (num > int(vals[0]) if op == ">" else num < int(vals[0]))
        if not ok:
            return False
    return True


def parse_field_selector(selector: str, resource: Resource) -> list[tuple[str, str, str]]:
    terms: list[tuple[str, str, str]] = []
    if not selector.strip():
        return terms
    supported = COMMON_FIELDS + (FIELD_SELECTORS.get(resource.kind, ()) if resource.builtin else ())
    for raw in selector.split(","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|!=|=)(.*)", raw)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{raw}'")
        field, op, value = m[1], "=" if m[2] == "==" else m[2], m[3].strip()
        if field not in supported:
            if resource.builtin:
                message = f"field label not supported: {field}"
            else:
                message = f"\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            raise ApiError(400, "BadRequest", message)
        terms.append((field, op, value))
    return terms


def _field_value(obj: dict, field: str) -> str:
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {}) or {}
    status = obj.get("status", {}) or {}
    if field == "metadata.name":
        return meta.get("name", "")
    if field == "metadata.namespace":
        return meta.get("namespace", "")
    if field == "source":
        return (obj.get("source") or {}).get("component", "")
    if field == "spec.hostNetwork":
        return "true" if spec.get("hostNetwork") else "false"
    if field == "spec.unschedulable":
        return "true" if spec.get("unschedulable") else "false"
    if field in ("status.successful", "status.replicas"):
        return str(status.get(field.split(".")[1], 0))
    if field == "status.podIPs":
        return ",".join(ip.get("ip", "") for ip in status.get("podIPs", []) or [])
    cur: Any = obj
    for part in field.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def fields_match(terms: Sequence[tuple[str, str, str]], obj: dict) -> bool:
    for field, op, value in terms:
        actual = _field_value(obj, field)
        if (actual == value) != (op == "="):
            return False
    return True
