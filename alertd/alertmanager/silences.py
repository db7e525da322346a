"""A small client for Alertmanager's API v2: silences for incidents.

``POST /api/v2/silences`` with ``{matchers, startsAt, endsAt, createdBy,
comment}`` answers ``{"silenceID": ...}``; ``DELETE /api/v2/silence/{id}``
expires one. The matchers for an incident are built here: the alertnames (and
Xid codes) of its alerts, its node (with the label name its alerts actually
carry), its cluster when the alerts carry one, and its GPU (the UUID label) when
the incident is about one GPU. ``GET /api/v2/alerts?filter=`` previews what a
silence matches.
"""
from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta
from typing import Mapping, TypedDict, cast
from urllib.parse import quote

import aiohttp
from yarl import URL

from alertd.core.durations import DurationError, DurationOutOfRange, parse_duration
from alertd.core.http_session import LazySession
from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.matchers import Matcher as CoreMatcher
from alertd.core.matchers import parse_matcher
from alertd.core.model import FIRING, Incident, Member, iso
from alertd.core.vocabulary import INSTANCE, NODE_LABELS, XID_LABELS

GPU_UUID_LABELS = ("UUID", "uuid", "gpu_uuid")


class AlertmanagerError(RuntimeError):
    pass


class Matcher(TypedDict):
    """A matcher of API v2 (models/matcher.go): isEqual false negates it."""

    name: str
    value: str
    isRegex: bool
    isEqual: bool


class SilenceStatus(TypedDict, total=False):
    state: str  # expired, active, pending


class Silence(TypedDict, total=False):
    """``GET /api/v2/silence/{id}``: a gettableSilence (id, status, updatedAt, and the postable fields)."""

    id: str
    status: SilenceStatus
    updatedAt: str
    matchers: list[Matcher]
    startsAt: str
    endsAt: str
    createdBy: str
    comment: str


class SilenceRecord(TypedDict):
    """What alertd records on an incident (annotation ``silence``) for the silence it created."""

    id: str
    startsAt: str
    endsAt: str
    createdBy: str
    matchers: list[Matcher]


def _matcher(name: str, value: str, regex: bool = False) -> Matcher:
    return {"name": name, "value": value, "isRegex": regex, "isEqual": True}


MIN_SILENCE, MAX_SILENCE = timedelta(minutes=1), timedelta(days=7)


def silence_duration(text: str) -> timedelta | str:
    """A silence's length from a Prometheus duration (``30m``, ``2h``, ``3d``), or what is wrong with it.
    Bounded: a silence longer than a week hides the next failure of the node as well."""
    too_long = f"duration {text!r}: a silence lasts from 1m to 7d"
    try:
        duration = parse_duration(text)
    except DurationOutOfRange:
        return too_long
    except DurationError:
        return f"duration {text!r}: give a Prometheus duration such as 30m, 4h or 2d"
    if not MIN_SILENCE <= duration <= MAX_SILENCE:
        return too_long
    return duration


def silence_matchers(inc: Incident, members: list[Member] | None = None, node_labels: tuple[str, ...] = NODE_LABELS,
                     cluster_label: str = "cluster", xid_labels: tuple[str, ...] = XID_LABELS) -> list[Matcher]:
    """Matchers that select the incident's alerts and nothing else on its nodes: the alertnames of its
    alerts (and their Xid codes, under the first of ``xid_labels`` they carry), its node (or nodes), its
    cluster, and the GPU for GPU-level incidents. ``members``: the alerts to scope by (a fleet's are its node
    incidents'); by default the incident's own. A heat silence thus leaves a later Xid 79 on the same nodes
    audible."""
    members = list(inc.members.values()) if members is None else members
    leading = [m for m in members if not m.folded] or members
    out: list[Matcher] = []
    names = sorted({m.alertname for m in members if m.alertname})
    if names:
        out.append(_one_of("alertname", names))
    xid_label = next((n for n in xid_labels if any(m.labels.get(n) for m in members)), "")
    if xid_label:
        codes = sorted({m.labels[xid_label] for m in members if m.labels.get(xid_label)})
        # alerts without the label (the node's exporter down, its cordon) match it as "": kept in
        out.append(_one_of(xid_label, codes + ([""] if any(not m.labels.get(xid_label) for m in members) else [])))
    if inc.fleet and inc.nodes:
        label = _label_for_nodes(members, set(inc.nodes), node_labels)
        out.append(_matcher(label, "|".join(_re_escape(n) for n in sorted(inc.nodes)), regex=True))
    elif inc.node:
        label = _label_for_nodes(members, {inc.node}, node_labels)
        value = inc.node
        if label == INSTANCE:  # the node came from host:port; match any port
            out.append(_matcher(label, _re_escape(value) + "(:[0-9]+)?", regex=True))
        else:
            out.append(_matcher(label, value))
    elif inc.pod:
        out.append(_matcher("pod", inc.pod))
        if inc.namespace:
            out.append(_matcher("namespace", inc.namespace))
    if inc.cluster and any(m.labels.get(cluster_label) == inc.cluster for m in members):
        out.append(_matcher(cluster_label, inc.cluster))
    uuids = {m.subject.gpu.uuid for m in leading if m.subject.gpu is not None and m.subject.gpu.uuid}
    gpu_level = len(uuids) == 1 and all(m.subject.gpu is not None for m in leading) and not inc.fleet
    if gpu_level:
        uuid = uuids.pop()
        label = next((n for m in leading for n in GPU_UUID_LABELS if m.labels.get(n) == uuid), "UUID")
        out.append(_matcher(label, uuid))
    if not any(m["name"] not in ("alertname", xid_label) for m in out):
        raise AlertmanagerError(f"incident {inc.id} has no node, pod or GPU to silence")
    return out


def _one_of(name: str, values: list[str]) -> Matcher:
    if len(values) == 1:
        return _matcher(name, values[0])
    return _matcher(name, "|".join(_re_escape(v) for v in values), regex=True)


_RE_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _re_escape(value: str) -> str:
    """A literal in an RE2 regex, escaping only its metacharacters (``gpu-r7.dc1`` -> ``gpu-r7\\.dc1``), so
    the matcher reads as written in Alertmanager's UI."""
    return _RE_SPECIAL.sub(r"\\\1", value)


def local_matchers(matchers: list[Matcher]) -> tuple[CoreMatcher, ...]:
    """The silence's matchers as alertd evaluates them (RE2, anchored, like Alertmanager's)."""
    return tuple(parse_matcher(matcher_text(m)) for m in matchers)


def matcher_text(m: Matcher) -> str:
    """``name=~"value"``: how amtool and Alertmanager's UI write a matcher."""
    op = ("=~" if m["isRegex"] else "=") if m["isEqual"] else ("!~" if m["isRegex"] else "!=")
    return str(CoreMatcher(m["name"], op, m["value"]))


def _label_for_nodes(members: list[Member], nodes: set[str], node_labels: tuple[str, ...]) -> str:
    firing = [m for m in members if m.status == FIRING] or members
    for name in node_labels:
        for m in firing:
            value = m.labels.get(name, "")
            if value in nodes or (name == INSTANCE and value.rsplit(":", 1)[0] in nodes):
                return name
    return node_labels[0] if node_labels else "node"


class AlertmanagerClient:
    def __init__(self, settings: AlertmanagerSettings):
        self.settings = settings
        self._session = LazySession(settings.timeout, headers=settings.headers, basic=settings.credentials)

    def session(self) -> aiohttp.ClientSession:
        return self._session.get()

    async def close(self) -> None:
        await self._session.close()

    async def _request(self, method: str, path: str, body: Mapping[str, object] | None = None) -> JSONValue:
        if not self.settings.url:
            raise AlertmanagerError("alertmanager.url is not configured")
        url = self.settings.url + path
        try:
            async with self.session().request(method, url, json=body) as resp:
                text = await resp.text()
                if resp.status >= 300:
                    raise AlertmanagerError(f"Alertmanager {method} {path}: HTTP {resp.status}: {text[:300]}")
                if not text.strip():
                    return None
                try:
                    doc: JSONValue = await resp.json(content_type=None)
                    return doc
                except ValueError:
                    return text
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise AlertmanagerError(f"Alertmanager {method} {path}: {type(exc).__name__}: {exc}") from None

    async def create_silence(self, matchers: list[Matcher], starts_at: datetime, ends_at: datetime,
                             created_by: str, comment: str) -> str:
        body = {"matchers": matchers, "startsAt": iso(starts_at), "endsAt": iso(ends_at),
                "createdBy": created_by or "alertd", "comment": comment or "silenced from alertd"}
        answer = await self._request("POST", "/api/v2/silences", body)
        if not isinstance(answer, dict) or not answer.get("silenceID"):
            raise AlertmanagerError(f"Alertmanager did not return a silenceID: {answer!r}")
        return str(answer["silenceID"])

    async def expire_silence(self, silence_id: str) -> None:
        await self._request("DELETE", f"/api/v2/silence/{silence_id}")

    async def get_silence(self, silence_id: str) -> Silence:
        answer = await self._request("GET", f"/api/v2/silence/{silence_id}")
        if not isinstance(answer, dict):
            raise AlertmanagerError(f"Alertmanager answered silence {silence_id} with {answer!r}, not an object")
        return cast(Silence, answer)  # the API's documented gettableSilence

    async def alerts_matching(self, matchers: list[Matcher]) -> list[JSONObject]:
        """The alerts Alertmanager holds now that the matchers select (active, silenced or inhibited alike):
        ``GET /api/v2/alerts?filter=...``, Alertmanager evaluating its own matchers."""
        query = "&".join(f"filter={quote(matcher_text(m), safe='')}" for m in matchers)
        answer = await self._request("GET", "/api/v2/alerts?" + query)
        if not isinstance(answer, list):
            raise AlertmanagerError(f"Alertmanager answered GET /api/v2/alerts with {answer!r}, not a list")
        return [a for a in answer if isinstance(a, dict)]

    async def silence_incident(self, inc: Incident, matchers: list[Matcher], duration: timedelta, created_by: str,
                               now: datetime, *, alertd_url: str = "") -> SilenceRecord:
        """Create the silence for the incident; returns what alertd records on it (annotation ``silence``)."""
        link = f" {URL(alertd_url).joinpath('ui', 'incidents', inc.id)}" if alertd_url else ""
        comment = f"alertd incident {inc.id}: {inc.title}{link}"
        ends = now + duration
        sid = await self.create_silence(matchers, now, ends, created_by, comment)
        return {"id": sid, "startsAt": iso(now), "endsAt": iso(ends), "createdBy": created_by, "matchers": matchers}
