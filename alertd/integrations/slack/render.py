"""Incident -> Slack Block Kit: one message that always shows the incident's current state.

Pure functions, no I/O: the Slack notifier renders the incident as stored at
delivery time. Everything is kept inside Block Kit's limits (50 blocks per
message, 3000 characters per section text, 150 per header, 10 fields of 2000,
10 context elements, 75 characters of button text) by truncating with
"... and N more" rather than letting Slack reject the message.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable

from yarl import URL

from alertd.core.durations import format_duration
from alertd.core.json_types import JSONObject, JSONValue, as_object, objects, text as json_text
from alertd.core.findings import Findings, SilenceFinding
from alertd.core.installation import scoped
from alertd.core.model import ACKNOWLEDGED, CLOSED, FIRING, OPEN, Event, Incident, Member, Severity, parse_iso
from alertd.core.signed_links import signed_query
from alertd.core.storm_growth import incident_trend
from alertd.core.verbs import VERBS, Verb
from alertd.core.vocabulary import EventKind as E, GpuAction, RemediationState
from alertd.integrations.base import Links
from alertd.integrations.presentation import (ACTION_TEXT, event_words, incident_action, incident_links, storm_says,
                                              web_url)

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_FIELD = 2000
MAX_FIELDS = 10
MAX_CONTEXT = 10
MAX_BUTTON = 75
MAX_FALLBACK = 3000  # the notification text; Slack's hard limit is far above, but phones show little
MAX_MEMBER_SECTIONS = 4
MAX_LOG_CHARS = 1500

ACTION_PREFIX = "alertd_"  # every button alertd draws (read back by alertd/integrations/slack/clicks.py)
ACTION_SILENCE_ANYWAY = ACTION_PREFIX + "silenceanyway_"  # + 1h | 4h | 24h: confirmed although it mutes other incidents
ACTION_REMEDIATE = ACTION_PREFIX + "remediation_"  # + approve | override | cancel (alertd/app/remediate.py)
SILENCE_CHOICES = ("1h", "4h", "24h")


def button_id(verb: str, duration: str = "") -> str:
    """A verb's button, from its declaration (alertd/core/verbs.py): ``alertd_<word>``, ``_<duration>`` after
    it for a verb that takes one, ``alertd_remediation_<name>`` for a remediation verb."""
    declared = VERBS[verb]
    if declared.remediation:
        return ACTION_REMEDIATE + declared.wire
    return ACTION_PREFIX + declared.wire + (f"_{duration}" if declared.duration else "")


SEVERITY_ICON: dict[str, str] = {Severity.CRITICAL: ":red_circle:", Severity.ERROR: ":large_orange_circle:",
                                 Severity.WARNING: ":large_yellow_circle:", Severity.INFO: ":large_blue_circle:"}


@dataclass(slots=True)
class RenderContext:
    runbook_base_url: str = ""
    alertmanager_url: str = ""
    alertd_url: str = ""
    link_secret: str = ""  # signs the "Incident" link so it opens without a token (alertd/core/signed_links.py)
    link_lifetime: timedelta = timedelta(days=7)
    note: str = ""  # routing note, e.g. a cordon downgrade
    now: datetime | None = None
    installation_id: str = ""  # prefixes button values (alertd/core/installation.py)
    buttons: bool = True  # a signing secret is set: clicks can be verified, so buttons can work
    silences: bool = True  # alertmanager.url is set: Silence can make one


def mrkdwn_escape(text: object) -> str:
    """Text from alerts as Slack shows it, never as markup: Slack's three control characters as entities
    (its documented escaping), so no text makes a link, a ``<!channel>``, ``<!here>``, ``<@U…>`` or ``<#C…>``."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(url: str, label: str) -> str:
    """``<url|label>`` when ``url`` is an http(s) URL (alertd.integrations.presentation.web_url), else the label as
    text. In the URL, ``&`` is written as Slack's entity and ``<``, ``>``, ``|``, spaces percent-encoded: none
    of them can end the link or start a label."""
    if not web_url(url):
        return mrkdwn_escape(label)
    target = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C").replace(" ", "%20")
    return f"<{target}|{mrkdwn_escape(label)}>"


def mrkdwn(text: str) -> JSONObject:
    """A mrkdwn text object. ``verbatim``: Slack does not turn names, channels or bare URLs in it into links
    or mentions; only the explicit ``<url|label>`` links built by ``link`` are links."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _ts(value: datetime | None) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if value else "-"


def pack_lines(lines: list[str], limit: int, max_chunks: int, more: str = "…and {n} more") -> list[str]:
    """Lines -> at most ``max_chunks`` texts of at most ``limit`` chars; what does not fit is counted."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    reserve = len(more.format(n=len(lines))) + 1
    for i, line in enumerate(lines):
        line = clip(line, limit - reserve - 1)
        last_chunk = len(chunks) == max_chunks - 1
        budget = limit - (reserve if last_chunk else 0)
        if size + len(line) + 1 > budget:
            if last_chunk:
                current.append(more.format(n=len(lines) - i))
                chunks.append("\n".join(current))
                return chunks
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        chunks.append("\n".join(current))
    return chunks


def join_limited(items: list[str], sep: str, limit: int) -> str:
    """Join as many items as fit in ``limit`` characters, then "…and N more"."""
    out: list[str] = []
    size = 0
    for i, item in enumerate(items):
        tail = f"{sep}…and {len(items) - i} more"
        if size + len(sep) + len(item) + len(tail) > limit and i < len(items) - 1 or size + len(item) > limit:
            return sep.join(out) + (tail if out else tail.lstrip(sep))
        out.append(item)
        size += len(item) + len(sep)
    return sep.join(out)


def gpu_label(g: dict[str, str]) -> str:
    parts = []
    if g.get("index"):
        parts.append(f"GPU {mrkdwn_escape(g['index'])}")
    if g.get("model"):
        parts.append(mrkdwn_escape(g["model"]))
    if g.get("pci_bus_id"):
        parts.append(mrkdwn_escape(g["pci_bus_id"]))
    if g.get("uuid"):
        parts.append(f"`{mrkdwn_escape(g['uuid'])}`")
    return " · ".join(parts) or "GPU"


def _silence(found: Findings, now: datetime) -> tuple[SilenceFinding | None, bool]:
    s = found.silence
    if s is None:
        return None, False
    ends = parse_iso(s.ends_at or None)
    return s, ends is None or ends > now


def severity_line(inc: Incident) -> str:
    icon = ":white_check_mark:" if inc.status == CLOSED else SEVERITY_ICON.get(inc.severity, ":white_circle:")
    state = {CLOSED: "RESOLVED", ACKNOWLEDGED: "ACKNOWLEDGED"}.get(inc.status, inc.severity.upper())
    return f"{icon} {state}"


def fallback_text(inc: Incident) -> str:
    state = inc.status if inc.status != OPEN else inc.severity
    return clip(f"[{state.upper()}] {mrkdwn_escape(inc.title)} ({inc.id})", MAX_FALLBACK)


def render_incident(inc: Incident, ctx: RenderContext | None = None) -> tuple[str, list[JSONObject]]:
    """(fallback text, blocks) for the incident's one message.

    From the top: header, facts, what it means, state notes, then the body (nodes, pods, alerts, kernel
    log) cut to fit, and last the links and buttons, which always survive the cut."""
    ctx = ctx or RenderContext()
    now = ctx.now or datetime.now(timezone.utc)
    found = inc.findings
    header = f"{severity_line(inc).split(' ', 1)[1]}: {inc.title}"
    blocks: list[JSONObject] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(header, MAX_HEADER), "emoji": True}},
        {"type": "section", "fields": [mrkdwn(clip(f, MAX_FIELD)) for f in _facts(inc, now)[:MAX_FIELDS]]},
    ]
    guidance = _guidance(inc)
    if guidance:
        blocks.append({"type": "section", "text": mrkdwn(clip(guidance, MAX_SECTION))})
    notes = _notes(inc, ctx, now, found)
    if notes:
        blocks.append({"type": "context", "elements": [mrkdwn(clip(n, MAX_FIELD)) for n in notes[:MAX_CONTEXT]]})
    tail: list[JSONObject] = []  # blocks that must survive truncation: links and buttons
    links = _links(inc, ctx)
    if links:
        tail.append({"type": "context", "elements": [mrkdwn(" · ".join(links))]})
    tail.extend(remediation_blocks(inc, ctx.installation_id, found) if ctx.buttons else [])
    buttons = action_buttons(inc, now, ctx.installation_id, found, silences=ctx.silences) if ctx.buttons else []
    if buttons:
        tail.append({"type": "actions", "block_id": f"alertd:{inc.id}", "elements": list[JSONValue](buttons)})
    blocks.extend(_fit(_body(inc, found), MAX_BLOCKS - len(blocks) - len(tail)))
    blocks.extend(tail)
    return fallback_text(inc), blocks[:MAX_BLOCKS]


def _facts(inc: Incident, now: datetime) -> list[str]:
    """The fields: severity, status, where, GPUs, Xids, pod, how long, which incident."""
    state = {CLOSED: "Resolved", ACKNOWLEDGED: "Acknowledged"}.get(inc.status, "Open")
    fields = [f"*Severity*\n{SEVERITY_ICON.get(inc.severity, '')} {mrkdwn_escape(inc.severity)}",
              f"*Status*\n{state}" + (f" by {mrkdwn_escape(inc.acknowledged_by)}" if inc.status == ACKNOWLEDGED and inc.acknowledged_by else "")]
    if inc.fleet:
        fields.append(f"*Nodes*\n{len(inc.nodes)} in {mrkdwn_escape(inc.cluster or 'the fleet')}")
    else:
        where = " / ".join(mrkdwn_escape(x) for x in (inc.cluster, inc.node) if x)
        if where:
            fields.append(f"*Cluster / node*\n{where}")
    if inc.gpus:
        fields.append("*GPUs*\n" + clip("\n".join(gpu_label(g) for g in inc.gpus[:8])
                                        + (f"\n…and {len(inc.gpus) - 8} more" if len(inc.gpus) > 8 else ""), MAX_FIELD - 8))
    if inc.xids:
        fields.append("*Xid*\n" + ", ".join(map(str, inc.xids)))
    if inc.namespace or inc.pod:
        fields.append("*Pod*\n" + mrkdwn_escape("/".join(x for x in (inc.namespace, inc.pod) if x)))
    if inc.status == CLOSED and inc.resolved_at:
        fields.append(f"*Open for*\n{format_duration(inc.resolved_at - inc.opened_at)}")
    else:
        fields.append(f"*Opened*\n{_ts(inc.opened_at)} ({format_duration(now - inc.opened_at)} ago)")
    fields.append(f"*Incident*\n{inc.id}" + (f" · {inc.flaps} flaps" if inc.flaps else ""))
    return fields


def _guidance(inc: Incident) -> str:
    """What it means and what to do, from the leading signal ("" without one)."""
    p = inc.primary
    if p is None:
        return ""
    lines = []
    if inc.verdict is not None:  # the GPU's or node's past changes what to do: said first
        lines.append(f":repeat: *History*\n{mrkdwn_escape(inc.verdict.line)}")
    if p.meaning:
        lines.append(f"*What happened*\n{mrkdwn_escape(p.meaning)}")
    chosen = incident_action(inc)
    action = ACTION_TEXT.get(chosen, chosen.replace("_", " ")) if chosen else ""
    if action:
        lines.append(f"*Recommended action*\n{mrkdwn_escape(action)}" + (" *Drain the GPU first.*" if p.drain and p.action != GpuAction.REBOOT_NODE else ""))
    if p.investigate:
        lines.append(f"*Investigate*\n{mrkdwn_escape(p.investigate)}")
    reading, advice = storm_says(inc)
    if reading:
        lines.append(f"*Readings*\n{mrkdwn_escape(reading)}")
    if advice:
        lines.append(f"*Advice*\n{mrkdwn_escape(advice)}")
    return "\n\n".join(lines)


def _notes(inc: Incident, ctx: RenderContext, now: datetime, found: Findings) -> list[str]:
    """State notes: routing note, silence, fleet membership, history, owners, missing kernel logs."""
    notes: list[str] = []
    for part in filter(None, ctx.note.split("; ")):  # a page a window holds back sleeps; a downgrade goes down
        notes.append(f"{':zzz:' if ' muted by ' in part else ':arrow_down:'} {mrkdwn_escape(part)}")
    silence, active = _silence(found, now)
    if silence:
        until = _ts(parse_iso(silence.ends_at or None))
        who = mrkdwn_escape(silence.created_by)
        notes.append(f":no_bell: Silenced until {until}" + (f" by {who}" if who else "") if active
                     else f":bell: Silence expired at {until}")
    if inc.parent_id:
        notes.append(f":link: Part of fleet incident {inc.parent_id}: follow it there.")
    if inc.fleet and inc.children:
        notes.append(f"Folds {len(inc.children)} node incidents")
    trend = incident_trend(inc.annotations, len(inc.nodes), inc.storm_last) if inc.fleet else ""
    if trend:  # the storm grew since it opened: how fast
        notes.append(f":chart_with_upwards_trend: {mrkdwn_escape(trend)}")
    if inc.previous_id:
        notes.append(f"Happened before: {inc.previous_id}")
    owners = found.owner_lines()
    if owners:
        notes.append("*Owners:* " + mrkdwn_escape("; ".join(owners)))
    jobs = found.jobs_line()
    if jobs:
        notes.append("*Jobs hit:* " + mrkdwn_escape(jobs))
    why = found.logs_unavailable
    if why is not None:
        notes.append(":warning: Kernel logs unavailable" + (f": {mrkdwn_escape(why)}" if why else ""))
    return notes


def _links(inc: Incident, ctx: RenderContext) -> list[str]:
    """Runbook, Prometheus (the first alert listed that has a link), Alertmanager, the incident's page."""
    shown = incident_links(inc, Links(ctx.runbook_base_url, ctx.alertmanager_url, ctx.alertd_url),
                           [m.generator_url for m in _ordered(inc.members.values())])
    tickets = [link(t.url, f"RMA {t.key}") if web_url(t.url) else f"RMA {mrkdwn_escape(t.key)}"
               for t in inc.tickets if t.key]
    page = shown.ui
    if page and ctx.link_secret:  # opens read-only without a token until it expires (docs/security.md)
        page = str(URL(page).with_query(signed_query(ctx.link_secret, inc.id, ctx.now or datetime.now(timezone.utc),
                                                     ctx.link_lifetime)))
    return [link(url, label) for url, label in ((shown.runbook, "Runbook"), (shown.prometheus, "Prometheus"),
                                                (shown.alertmanager, "Alertmanager"), (page, "Incident")) if url] + tickets


def _body(inc: Incident, found: Findings) -> list[JSONObject]:
    """The long part: a fleet's nodes, the pods on the GPUs, the alerts, the kernel log."""
    body: list[JSONObject] = []
    if inc.fleet and inc.nodes:
        body.append(_section(f"*Nodes ({len(inc.nodes)})*\n" + join_limited([mrkdwn_escape(n) for n in sorted(inc.nodes)],
                                                                            ", ", MAX_SECTION - 40)))
    pods = found.pod_lines()
    if pods:
        body.append(_section("*Pods on the GPU(s)*\n" + "\n".join(pack_lines([mrkdwn_escape(x) for x in pods], MAX_SECTION - 40, 1))))
    member_lines = [member_line(m) for m in _ordered(inc.members.values())]
    if member_lines:
        firing = sum(1 for m in inc.members.values() if m.status == FIRING)
        title = f"*Alerts* ({firing} firing, {len(member_lines) - firing} resolved)"
        chunks = pack_lines(member_lines, MAX_SECTION - len(title) - 2, MAX_MEMBER_SECTIONS)
        for i, chunk in enumerate(chunks):
            body.append(_section((title + "\n" if i == 0 else "") + chunk))
    evidence = found.log_lines()
    if evidence:
        text = clip("\n".join(mrkdwn_escape(line) for line in evidence), MAX_LOG_CHARS)
        more = len(evidence) - text.count("\n") - 1
        suffix = f"\n…and {more} more lines" if more > 0 and text.endswith("…") else ""
        body.append(_section("*Kernel log*\n```" + text.replace("```", "'''") + "```" + suffix))
    return body


def _fit(body: list[JSONObject], budget: int) -> list[JSONObject]:
    """At most ``budget`` blocks: the last one kept says how many sections were left out."""
    if len(body) <= budget:
        return body
    dropped = len(body) - budget + 1
    return body[: budget - 1] + [_section(f"…and {dropped} more sections")]


def _section(text: str) -> JSONObject:
    return {"type": "section", "text": mrkdwn(clip(text, MAX_SECTION))}


def _ordered(members: Iterable[Member]) -> list[Member]:
    return sorted(members, key=lambda m: (m.status != FIRING, m.folded, m.starts_at, m.fingerprint))


def member_line(m: Member) -> str:
    icon = ":fire:" if m.status == FIRING else ":white_check_mark:"
    what = m.signal.title or m.alertname
    if m.signal.xid and f"Xid {m.signal.xid}" not in what:
        what = f"Xid {m.signal.xid}: {what}"
    gpu = f" GPU {m.subject.gpu.index}" if m.subject.gpu and m.subject.gpu.index else ""
    node = f" on {m.subject.node}" if m.subject.node else ""
    since = m.starts_at.astimezone(timezone.utc).strftime("%H:%M")
    tail = f" (resolved {m.ends_at.astimezone(timezone.utc).strftime('%H:%M')})" if m.status != FIRING and m.ends_at else ""
    folded = " _(fallout)_" if m.folded else ""
    name = link(m.generator_url, m.alertname) if web_url(m.generator_url) else f"`{mrkdwn_escape(m.alertname)}`"
    return f"{icon} {name} {mrkdwn_escape(what)}{mrkdwn_escape(gpu + node)} since {since}{tail}{folded}"


def action_buttons(inc: Incident, now: datetime, installation_id: str = "",
                   found: Findings | None = None, *, silences: bool = True) -> list[JSONObject]:
    """Acknowledge, resolve and silence (or unsilence; ``silences``: only where Alertmanager can be asked);
    ``found``: the incident's findings, when the caller has read them already."""
    if inc.status == CLOSED:
        return []
    out = []
    value = scoped(installation_id, inc.id)
    if inc.status != ACKNOWLEDGED:
        out.append(_button("Acknowledge", button_id(Verb.ACKNOWLEDGE), value, style="primary"))
    out.append(_button("Resolve", button_id(Verb.RESOLVE), value, confirm=("Resolve this incident?",
                                                                    "It closes now, even if alerts still fire.")))
    silence, active = _silence(found or inc.findings, now)
    if silence and active:
        out.append(_button("Unsilence", button_id(Verb.UNSILENCE), value))
    elif silences:
        for d in SILENCE_CHOICES:
            out.append(_button(f"Silence {d}", button_id(Verb.SILENCE, d), value))
    return out


def overlap_question(incident_id: str, value: str, duration: str, lines: list[str]) -> list[JSONObject]:
    """Asked of the clicker alone when a silence would mute other open incidents too: what it would
    mute, and the button that makes it anyway. ``lines``: one per incident it would also mute."""
    shown = "\n".join(f"• {mrkdwn_escape(line)}" for line in lines[:10])
    more = f"\n…and {len(lines) - 10} more" if len(lines) > 10 else ""
    text = (f"*Silence {incident_id} for {duration}?* It would also mute these open incidents:\n{shown}{more}")
    return [_section(text), {"type": "actions", "block_id": f"alertd-silence:{incident_id}", "elements": [
        _button(f"Silence {duration} anyway", ACTION_SILENCE_ANYWAY + duration, value, style="danger")]}]


def remediation_blocks(inc: Incident, installation_id: str = "", found: Findings | None = None) -> list[JSONObject]:
    """The remediation proposal waiting on the incident (annotation ``remediation``) and its buttons;
    ``found``: the incident's findings, when the caller has read them already."""
    rem = (found or inc.findings).remediation
    if inc.status == CLOSED or rem is None or not rem.waiting:
        return []
    value = scoped(installation_id, inc.id)
    dry = " (dry run: nothing will be done)" if rem.dry_run else ""
    text = f"*Proposed: {mrkdwn_escape(rem.action)}*{dry}\n{mrkdwn_escape(rem.text)}"
    held = rem.state == RemediationState.HELD
    approve = ("override", "Override breaker and approve") if held else ("approve", "Approve")
    what = f"{rem.action} of {', '.join(rem.nodes)}"
    buttons: list[JSONValue] = [_button(f"{approve[1]} {rem.action}", button_id(approve[0]), value, style="danger",
                       confirm=(f"Approve {clip(what, 80)}?", clip(rem.text, 250), "Approve")),
               _button("Cancel remediation", button_id(Verb.CANCEL), value)]
    return [_section(text), {"type": "actions", "block_id": f"alertd-remediation:{inc.id}", "elements": buttons}]


def _button(text: str, action_id: str, value: str, *, style: str = "",
            confirm: tuple[str, str] | tuple[str, str, str] | None = None) -> JSONObject:
    b: JSONObject = {"type": "button", "text": {"type": "plain_text", "text": clip(text, MAX_BUTTON)},
                         "action_id": action_id, "value": value}
    if style:
        b["style"] = style
    if confirm:
        b["confirm"] = {"title": {"type": "plain_text", "text": confirm[0]},
                        "text": {"type": "plain_text", "text": confirm[1]},
                        "confirm": {"type": "plain_text", "text": confirm[2] if len(confirm) > 2 else "Resolve"},
                        "deny": {"type": "plain_text", "text": "Cancel"}}
    return b


# ----- thread replies -----

EVENT_ICON: dict[str, str] = {
    E.ALERT_JOINED: ":heavy_plus_sign:", E.ALERT_FOLDED: ":heavy_plus_sign:", E.ACKNOWLEDGED: ":eyes:",
    E.RESOLVED: ":white_check_mark:", E.EVIDENCE: ":mag:", E.CLASSIFICATION_UPGRADED: ":arrow_up:",
    E.SILENCED: ":no_bell:", E.SILENCE_REMOVED: ":bell:", E.ESCALATED: ":rotating_light:",
    E.REPAIR_FAILED: ":rotating_light:",
    E.VERDICT: ":repeat:", E.STORM_DOUBLED: ":chart_with_upwards_trend:",
}


def event_line(e: Event | JSONObject) -> str:
    ev = e if isinstance(e, Event) else Event.from_dict(e)
    icon = EVENT_ICON.get(ev.kind, ":small_blue_diamond:")
    text = ev.text or event_words(ev.kind)
    return f"{icon} {mrkdwn_escape(text)}"


def render_thread(events: list[JSONObject], inc: Incident | None = None, limit_lines: int = 30) -> tuple[str, list[JSONObject]]:
    """One reply for a batch of timeline events (coalesced), within the limits."""
    lines = [event_line(e) for e in events]
    shown = lines[:limit_lines]
    if len(lines) > limit_lines:
        shown.append(f"…and {len(lines) - limit_lines} more")
    if inc is not None and inc.status == CLOSED and any((e.get("kind") if isinstance(e, dict) else e.kind) == E.RESOLVED for e in events):
        shown.append(resolution_summary(inc))
    chunks = pack_lines(shown, MAX_SECTION, 3)
    blocks = [_section(c) for c in chunks]
    return clip(shown[0] if shown else "update", MAX_FALLBACK), blocks


def resolution_summary(inc: Incident) -> str:
    dur = format_duration((inc.resolved_at or inc.updated_at) - inc.opened_at)
    total = len(inc.members)
    kinds = mrkdwn_escape(", ".join(inc.signals) or "-")
    xids = f"; Xid {', '.join(map(str, inc.xids))}" if inc.xids else ""
    who = f"; acknowledged by {mrkdwn_escape(inc.acknowledged_by)}" if inc.acknowledged_by else ""
    flaps = f"; {inc.flaps} flaps" if inc.flaps else ""
    return f"*Summary:* open for {dur}; {total} alert{'s' if total != 1 else ''} ({kinds}{xids}){who}{flaps}."


def to_text(blocks: list[JSONObject]) -> str:
    """A plain-text picture of a message, for docs and logs."""
    out = []
    for b in blocks:
        t = b.get("type")
        if t == "header":
            out.append(f"== {json_text(as_object(b.get('text')), 'text')} ==")
        elif t == "section":
            if "text" in b:
                out.append(json_text(as_object(b.get("text")), "text"))
            for f in objects(b.get("fields")):
                out.append("  " + json_text(f, "text").replace("\n", ": ", 1))
        elif t == "context":
            out.append("  " + " | ".join(json_text(e, "text") for e in objects(b.get("elements"))))
        elif t == "actions":
            out.append("  " + " ".join(f"[{json_text(as_object(e.get('text')), 'text')}]" for e in objects(b.get("elements"))))
        elif t == "divider":
            out.append("-" * 40)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def dumps(blocks: list[JSONObject]) -> str:
    return json.dumps(blocks, indent=2, ensure_ascii=False)
