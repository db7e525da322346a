"""Links into Alertmanager's UI: the filter is matcher syntax, percent-encoded whole, under any path prefix."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote, urlsplit

from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.alertmanager.silences import AlertmanagerClient
from alertd.core.matchers import parse_matcher
from alertd.core.model import Incident
from alertd.integrations.presentation import alertmanager_link, alertmanager_page, silence_link

AWKWARD = 'gpu "7", rack=b'
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _incident(node: str) -> Incident:
    return Incident(id="inc-1", key="k", group="g", title="t", severity="critical", category="hardware",
                    status="open", opened_at=T0, updated_at=T0, node=node)


def _filter(link: str) -> str:
    fragment = urlsplit(link).fragment
    path, _, query = fragment.partition("?")
    assert path == "/alerts"
    name, eq, value = query.partition("=")
    assert (name, eq) == ("filter", "=") and "=" not in value and "," not in value and " " not in value
    return unquote(value)  # Alertmanager's UI percent-decodes only: no '+' for a space


def test_a_label_value_with_quotes_commas_equals_and_spaces_survives_the_round_trip():
    inc = _incident(AWKWARD)
    link = alertmanager_link(inc, "http://am.example/alertmanager/")
    assert link.startswith("http://am.example/alertmanager/#/alerts?filter=")
    text = _filter(link)
    assert text.startswith("{") and text.endswith("}")
    matcher = parse_matcher(text[1:-1])
    assert (matcher.name, matcher.op, matcher.value) == ("node", "=", AWKWARD)


def test_the_path_prefix_is_kept_with_or_without_its_slash():
    for base in ("http://am.example/alertmanager/", "http://am.example/alertmanager"):
        assert silence_link(base, "5e1c a/b") == "http://am.example/alertmanager/#/silences/5e1c%20a%2Fb"
    assert alertmanager_page("http://am.example:9093", "/alerts") == "http://am.example:9093/#/alerts"


def test_no_link_without_a_web_base():
    inc = _incident("n1")
    assert alertmanager_link(inc, "") == "" and silence_link("javascript:alert(1)", "x") == ""


def test_a_silence_names_the_incident_page_under_alertd_path_prefix():
    client, sent = AlertmanagerClient(AlertmanagerSettings(url="http://127.0.0.1:9")), []

    async def create(matchers, starts_at, ends_at, created_by, comment):
        sent.append(comment)
        return "s-1"
    client.create_silence = create  # type: ignore[method-assign]
    inc = _incident("n1")
    asyncio.run(client.silence_incident(inc, [], timedelta(hours=1), "ana", T0, alertd_url="https://ops.example/alertd/"))
    assert sent == ["alertd incident inc-1: t https://ops.example/alertd/ui/incidents/inc-1"]
