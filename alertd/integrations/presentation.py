"""What every integration shows the same way: action texts, and the links of an incident (runbook,
Alertmanager), with the one rule for URLs that come from alerts.

Alert labels and annotations are written by whoever writes Prometheus rules, and a generatorURL or
``runbook_url`` annotation can hold anything: ``javascript:``, ``data:``, text made to look like a link.
Only an absolute http(s) URL with a host becomes a link anywhere alertd sends or shows one (Slack,
PagerDuty, Opsgenie, the signed webhook, the web UI); anything else is text or left out.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping
from urllib.parse import quote, urlencode, urlsplit

from yarl import URL

from alertd.core.matchers import Matcher
from alertd.core.model import STORM_SAYS
from alertd.core.vocabulary import ACTION_ADVICE, EVENT_WORDS
from alertd.integrations.base import Links

if TYPE_CHECKING:
    from alertd.core.model import Incident

ACTION_TEXT = ACTION_ADVICE  # each action in a sentence (alertd/core/vocabulary.py)


def action_in_words(action: str) -> str:
    """The catalog's action (``reboot_node``) as a person reads it; an action without a sentence, its words."""
    return ACTION_TEXT.get(action, action.replace("_", " ")) if action else ""


def incident_action(inc: "Incident") -> str:
    """The action the incident asks for: its history verdict's when it has one (rules/history.yml), else its
    leading signal's (the Xid catalog's)."""
    if inc.verdict is not None and inc.verdict.action:
        return inc.verdict.action
    return inc.primary.action if inc.primary else ""


def storm_says(inc: "Incident") -> tuple[str, str]:
    """What a fleet incident says of its storm as a whole (engine/storm/extent.py): the readings of its GPUs
    (the hottest, range and median temperature) and the advice of its event (rules/correlation.yml)."""
    says = inc.annotations.get(STORM_SAYS)
    if not isinstance(says, dict):
        return "", ""
    reading, advice = says.get("reading"), says.get("advice")
    return (reading if isinstance(reading, str) else ""), (advice if isinstance(advice, str) else "")


WEB_SCHEMES = ("http", "https")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # control characters (line breaks too): never inside a URL


def web_url(url: str) -> str:
    """``url`` when it is an absolute http(s) URL with a host, else "" (not to be made a link)."""
    if not url or _CONTROL.search(url):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:  # an invalid IPv6 host, for one
        return ""
    return url if parts.scheme.lower() in WEB_SCHEMES and parts.netloc else ""


def runbook_url(page: str, base: str) -> str:
    """The runbook link: an http(s) page as it is, a relative page under ``base`` (``.md`` added), else ""."""
    if not page:
        return ""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", page):  # has a scheme: only the web's become links
        return web_url(page)
    if not base:
        return ""
    path = quote(page.lstrip("/"), safe="/-._~#")
    return web_url(base.rstrip("/") + "/" + path + ("" if page.endswith(".md") else ".md"))


def alertmanager_link(inc: "Incident", base: str) -> str:
    """The incident's alerts in Alertmanager's UI (filtered by node, pod or cluster), or "" without a base."""
    if inc.fleet:
        matcher = Matcher("cluster", "=", inc.cluster) if inc.cluster else None
    else:
        matcher = Matcher("node", "=", inc.node) if inc.node else (Matcher("pod", "=", inc.pod) if inc.pod else None)
    return alertmanager_page(base, "/alerts", {"filter": "{" + str(matcher) + "}"} if matcher else {})


def silence_link(base: str, silence_id: str) -> str:
    """A silence in Alertmanager's UI, or "" without a base."""
    return alertmanager_page(base, "/silences/" + quote(silence_id, safe=""))


def alertmanager_page(base: str, view: str, query: Mapping[str, str] | None = None) -> str:
    """A page of Alertmanager's UI under ``base`` (which may carry a path prefix), or "" when ``base`` is no web URL.
    ``view`` is an encoded path (``/alerts``). The UI routes on the fragment (``#/alerts?filter=...``) and reads its query with percent-decoding only, so each
    value is percent-encoded whole (a space is %20, never ``+``; ``=``, ``,``, ``&`` and ``"`` are encoded too)."""
    if not web_url(base):
        return ""
    root = URL(base)
    page = URL.build(path=view, query_string=urlencode(query or {}, quote_via=quote), encoded=True)
    return str(URL.build(scheme=root.scheme, authority=root.raw_authority, path=root.raw_path.rstrip("/") + "/",
                         fragment=str(page), encoded=True))


def first_web_url(urls: Iterable[str]) -> str:
    """The first of ``urls`` that may become a link (a member's generatorURL), or ""."""
    return next((u for u in urls if web_url(u)), "")


@dataclass(frozen=True, slots=True)
class IncidentLinks:
    """Every link an integration may show for one incident; "" where there is none. Each is an
    http(s) URL (``web_url``): what an integration shows is a choice among these, never built anew."""

    runbook: str = ""
    prometheus: str = ""  # the first member's generatorURL that may be a link
    alertmanager: str = ""  # the incident's alerts in Alertmanager's UI
    ui: str = ""  # the incident's page in alertd's web UI
    api: str = ""  # the incident in alertd's API (for machines: the webhook, Opsgenie details)


def incident_links(inc: "Incident", links: Links, generator_urls: Iterable[str] | None = None) -> IncidentLinks:
    """The links of ``inc`` under the configured bases. ``generator_urls``: the members' generatorURLs in
    the order the message lists them (default: the members' own order)."""
    p = inc.primary
    urls = generator_urls if generator_urls is not None else (m.generator_url for m in inc.members.values())
    alertd = URL(links.alertd_url) if web_url(links.alertd_url) else None
    return IncidentLinks(
        runbook=runbook_url(p.runbook if p else "", links.runbook_base_url),
        prometheus=first_web_url(urls),
        alertmanager=alertmanager_link(inc, links.alertmanager_url),
        ui=str(alertd.joinpath("ui", "incidents", inc.id)) if alertd else "",
        api=str(alertd.joinpath("api", "v1", "incidents", inc.id)) if alertd else "",
    )


def event_words(kind: str) -> str:
    """A timeline event's kind as a reader reads it: ``alert_joined`` -> "Alert joined"."""
    return EVENT_WORDS.get(kind) or kind.replace("_", " ").capitalize()


def ref_words(kind: str, ref: str) -> tuple[str, str]:
    """A notification target's saved reference in words, and the key a person may look up (a PagerDuty dedup
    key), instead of its stored form (``{"state": "triggered", ...}``): ("PagerDuty alert triggered (critical)",
    "INC-7")."""
    if not ref:
        return "", ""
    if ref.startswith("unconfirmed:"):
        return "posting: not yet confirmed by Slack", ""
    try:
        doc = json.loads(ref)
    except ValueError:
        return ref, ""
    if not isinstance(doc, dict):
        return ref, ""
    what = {"pagerduty": "PagerDuty alert", "opsgenie": "Opsgenie alert"}.get(kind, "Sent")
    state, severity = str(doc.get("state") or "sent"), str(doc.get("severity") or "")
    return f"{what} {state}" + (f" ({severity})" if severity else ""), str(doc.get("dedup_key") or "")
