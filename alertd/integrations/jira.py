"""Jira Cloud as an RMA ticket system: REST API v3 issue create, the evidence in Atlassian Document Format.

``POST {url}/rest/api/3/issue`` with basic auth (the account's email and an API token) and
``{"fields": {"project": {"key"}, "issuetype": {"name"}, "summary", "description": <ADF doc>, "labels"}}``.
Jira answers 201 with ``{"id", "key", "self"}``; 400 with ``{"errorMessages": [...], "errors": {field: why}}``
for a bad field (a label with a space, an unknown project or issue type, a description that is not an
Atlassian document); 401 for bad credentials. 400, 401, 403 and 404 are not retried (the configuration is
wrong); 408, 429 and 5xx are. The link shown on the incident is ``{url}/browse/{key}``.

Jira has no idempotency key. Every issue carries its own label (``alertd-rma-`` + a hash of incident and
GPU): ``find`` asks the enhanced JQL search (``POST /rest/api/3/search/jql``) for it, which is how an issue
created just before a crash is found instead of created again.
"""
from __future__ import annotations

import asyncio
import base64
from datetime import datetime
from typing import Literal, TypedDict

import aiohttp

from alertd.core.http_session import LazySession
from alertd.core.model import iso
from alertd.core.tickets import RmaEvidence, TicketLink
from alertd.integrations.tickets import JiraSettings, TicketError, worth_retrying

ISSUE_PATH = "/rest/api/3/issue"
SEARCH_PATH = "/rest/api/3/search/jql"
MAX_LOG_LINES = 50


class AdfText(TypedDict):
    type: Literal["text"]
    text: str


class AdfParagraph(TypedDict):
    type: Literal["paragraph"]
    content: list[AdfText]


class AdfHeadingAttrs(TypedDict):
    level: int


class AdfHeading(TypedDict):
    type: Literal["heading"]
    attrs: AdfHeadingAttrs
    content: list[AdfText]


class AdfListItem(TypedDict):
    type: Literal["listItem"]
    content: list[AdfParagraph]


class AdfBulletList(TypedDict):
    type: Literal["bulletList"]
    content: list[AdfListItem]


class AdfCodeBlock(TypedDict):
    type: Literal["codeBlock"]
    content: list[AdfText]


AdfBlock = AdfParagraph | AdfHeading | AdfBulletList | AdfCodeBlock


class AdfDoc(TypedDict):
    type: Literal["doc"]
    version: int
    content: list[AdfBlock]


class ProjectRef(TypedDict):
    key: str


class IssueTypeRef(TypedDict):
    name: str


class IssueFields(TypedDict):
    project: ProjectRef
    issuetype: IssueTypeRef
    summary: str
    description: AdfDoc
    labels: list[str]


class IssueCreate(TypedDict):
    fields: IssueFields


class JqlSearch(TypedDict):
    jql: str
    fields: list[str]
    maxResults: int


def _text(text: str) -> list[AdfText]:
    return [{"type": "text", "text": text}] if text else []


def _heading(text: str) -> AdfHeading:
    return {"type": "heading", "attrs": {"level": 3}, "content": _text(text)}


def _bullets(lines: list[str]) -> AdfBulletList:
    return {"type": "bulletList", "content": [{"type": "listItem", "content": [{"type": "paragraph",
                                                                               "content": _text(line)}]}
                                              for line in lines if line]}


def description(ev: RmaEvidence) -> AdfDoc:
    """The evidence as an Atlassian document: the GPU, why, its Xid history with times, the kernel log."""
    gpu = [f"GPU UUID: {ev.gpu_uuid or 'unknown'}", f"Serial: {ev.serial or 'not labelled'}",
           f"PCI address: {ev.pci_bus_id or 'unknown'}", f"Model: {ev.model}" if ev.model else "",
           f"Node: {ev.node}", f"Cluster: {ev.cluster}", f"Incident: {ev.incident} {ev.title}".strip(),
           f"alertd: {ev.link}" if ev.link else ""]
    content: list[AdfBlock] = [_heading("GPU"), _bullets(gpu)]
    if ev.why:
        content += [_heading("Why"), {"type": "paragraph", "content": _text(ev.why)}]
    xids = [f"{x.at} Xid {x.xid} ({x.incident}{', ' + x.node if x.node else ''})" for x in ev.xid_history]
    content += [_heading("Xid history"), _bullets(xids) if xids else
                {"type": "paragraph", "content": _text("No Xid recorded for this GPU.")}]
    lines = list(ev.kernel_log[-MAX_LOG_LINES:])
    content += [_heading("Kernel log"), {"type": "codeBlock", "content": _text("\n".join(lines))} if lines else
                {"type": "paragraph", "content": _text("No kernel log lines were found.")}]
    return {"type": "doc", "version": 1, "content": content}


def issue(settings: JiraSettings, ev: RmaEvidence) -> IssueCreate:
    labels = sorted({*settings.labels, ev.label})
    return {"fields": {"project": {"key": settings.project}, "issuetype": {"name": settings.issue_type},
                       "summary": ev.summary, "description": description(ev), "labels": labels}}


def refusal(status: int, body: object) -> str:
    """Jira's error body (``errorMessages``, ``errors``) in one line."""
    if isinstance(body, dict):
        messages = [str(m) for m in body.get("errorMessages") or []]
        errors = body.get("errors") or {}
        if isinstance(errors, dict):
            messages += [f"{field}: {why}" for field, why in sorted(errors.items())]
        if messages:
            return f"HTTP {status}: " + "; ".join(messages)
    return f"HTTP {status}: {str(body)[:200]}"


class JiraTickets:
    """A TicketSystem (alertd/integrations/tickets.py) over Jira Cloud's REST API v3."""

    system = "jira"

    def __init__(self, settings: JiraSettings, timeout: float, target: str = "jira"):
        self.settings, self._target = settings, target
        basic = base64.b64encode(f"{settings.email}:{settings.api_token}".encode()).decode()
        self._session = LazySession(timeout, headers={"Accept": "application/json", "Authorization": f"Basic {basic}"})

    @property
    def target(self) -> str:
        return self._target

    async def _post(self, path: str, doc: IssueCreate | JqlSearch) -> object:
        """Jira's answer to a 2xx; TicketError otherwise (``retry`` for 408, 429, 5xx and the network)."""
        try:
            async with self._session.get().post(self.settings.url + path, json=doc) as resp:
                status = resp.status
                try:
                    body: object = await resp.json(content_type=None)
                except ValueError:
                    body = (await resp.text())[:200]
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise TicketError(f"Jira {path}: {type(exc).__name__}: {exc}", retry=True) from None
        if not 200 <= status < 300:
            raise TicketError(f"Jira {path}: {refusal(status, body)}", retry=worth_retrying(status))
        return body

    def _link(self, key: str, gpu: str, at: str) -> TicketLink:
        return TicketLink(self._target, self.system, key, f"{self.settings.url}/browse/{key}", gpu, at)

    async def find(self, evidence: RmaEvidence) -> TicketLink | None:
        query: JqlSearch = {"jql": f'project = "{self.settings.project}" AND labels = "{evidence.label}"',
                            "fields": ["key", "created"], "maxResults": 1}
        body = await self._post(SEARCH_PATH, query)
        issues = body.get("issues") if isinstance(body, dict) else None
        if not isinstance(issues, list) or not issues or not isinstance(issues[0], dict):
            return None
        return self._link(str(issues[0].get("key", "")), evidence.gpu_uuid, "")

    async def open(self, evidence: RmaEvidence, now: datetime) -> TicketLink:
        body = await self._post(ISSUE_PATH, issue(self.settings, evidence))
        key = body.get("key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key:
            raise TicketError(f"Jira answered without an issue key: {str(body)[:200]}", retry=False)
        return self._link(key, evidence.gpu_uuid, iso(now))

    async def close(self) -> None:
        await self._session.close()


__all__ = ["JiraTickets", "description", "issue", "refusal"]
