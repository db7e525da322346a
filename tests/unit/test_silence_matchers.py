"""Silences scoped to the fault: the matchers built from an incident, and the preview that finds the other open
incidents a silence would mute."""
from __future__ import annotations

import asyncio
from typing import Collection

from alertd.alertmanager.silences import local_matchers, matcher_text, silence_matchers
from alertd.app.silence_preview import preview_silence
from alertd.config.settings import parse_config
from alertd.core.matchers import match_all
from alertd.core.model import Incident
from alertd.integrations.slack.clicks import read_click
from alertd.integrations.slack.render import overlap_question
from testkit.builders import alert, at, engine, xid

GPU = {"gpu": "0", "UUID": "GPU-n1-0", "pci_bus_id": "00000000:18:00.0", "Hostname": "dcgm-exporter-abcde"}


def heat(node: str) -> dict[str, str]:
    return {"node": node, **GPU, "severity": "warning"}


class Store:
    def __init__(self, *incidents: Incident):
        self.by_id = {i.id: i for i in incidents}

    async def incidents_with_members(self, ids: list[str]) -> list[Incident]:
        return [self.by_id[i] for i in ids if i in self.by_id]

    async def open_incidents_on(self, nodes: list[str], limit: int, known: Collection[str] = ()) -> list[Incident]:
        return [i for i in self.by_id.values() if i.status in ("open", "acknowledged") and i.id not in known
                and {i.node, *i.nodes} & set(nodes)][:limit]


class Alertmanager:
    def __init__(self) -> None:
        self.asked: list[list] = []

    async def alerts_matching(self, matchers):
        self.asked.append(matchers)
        return [{"labels": {"alertname": "DCGMExporterDown", "node": "n1"}, "status": {"state": "active"}}]


def test_a_heat_silence_does_not_select_a_later_xid_79_on_its_node():
    inc = engine().ingest([alert("GPUTemperatureHigh", **heat("n1")),
                           alert("GPUClockEventThrottling", clock_event_reasons="64", **heat("n1"))], at(0))[0].incident
    matchers = local_matchers(silence_matchers(inc))
    assert all(match_all(matchers, m.labels) for m in inc.members.values())
    later = xid(79, node="n1", gpu="0")
    assert not match_all(matchers, later.labels)
    assert [str(m) for m in matchers][:1] == ['alertname=~"GPUClockEventThrottling|GPUTemperatureHigh"']


def test_alerts_without_the_xid_label_stay_in_an_xid_incidents_silence():
    down = alert("DCGMExporterDown", node="n1", severity="critical")
    inc = engine().ingest([xid(79, node="n1", gpu="0"), xid(79, node="n1", gpu="1"), down], at(0))[0].incident
    matchers = local_matchers(silence_matchers(inc))
    assert all(match_all(matchers, m.labels) for m in inc.members.values())
    assert not match_all(matchers, xid(13, node="n1", gpu="0").labels)


def test_the_preview_names_another_open_incident_it_would_mute():
    earlier = engine().ingest([alert("DCGMExporterDown", node="n1", severity="critical")], at(0))[0].incident
    earlier.id = "INC-1"
    inc = engine().ingest([xid(79, node="n1", gpu="0"), alert("DCGMExporterDown", node="n1", severity="critical")],
                          at(60))[0].incident
    inc.id = "INC-2"
    other = engine().ingest([xid(79, node="n2", gpu="0")], at(0))[0].incident
    other.id = "INC-3"
    am = Alertmanager()
    preview = asyncio.run(preview_silence(Store(earlier, inc, other), am, parse_config({}, "test", env={}), inc))
    assert [m.id for m in preview.overlap] == ["INC-1"] and preview.overlap[0].alerts == ("DCGMExporterDown",)
    assert [m.id for m in preview.incidents] == ["INC-2"]
    assert am.asked == [preview.matchers] and preview.to_dict()["alertCount"] == 1
    assert "it would also mute INC-1" in preview.summary()


def test_slack_asks_again_with_a_button_that_silences_anyway():
    blocks = overlap_question("INC-2", "INC-2", "4h", ["INC-1: metrics missing on n1 (DCGMExporterDown)"])
    (button,) = blocks[1]["elements"]
    click = read_click(button)
    assert click.verb == "silence" and click.duration == "4h" and click.force and click.value == "INC-2"
    assert not read_click({"action_id": "alertd_silence_4h", "value": "INC-2"}).force
    assert "INC-1" in blocks[0]["text"]["text"]


def _buttons(blocks) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_slack_buttons_only_where_they_can_work():
    from datetime import datetime, timezone

    from alertd.integrations.slack.integration import SlackNotifier, SlackSettings
    from alertd.integrations.slack.render import render_incident

    inc = engine().ingest([xid(79, node="n1", gpu="0")], at(0))[0].incident
    now = datetime(2026, 11, 30, 12, 5, tzinfo=timezone.utc)

    def shown(doc: dict) -> list[str]:
        am = {"alertmanager": {"url": "http://am:9093"}} if doc.pop("am", False) else {}
        settings = SlackSettings.from_config(parse_config({"notify": {"slack": {"token": "xoxb-1", **doc}}, **am},
                                                          "test", env={}))
        ctx = SlackNotifier(settings, None, lambda: now)._render_context()  # type: ignore[arg-type]
        return _buttons(render_incident(inc, ctx)[1])

    assert shown({}) == []  # no signing secret: a click could not be verified
    assert shown({"signing_secret": "s3cret"}) == ["alertd_ack", "alertd_resolve"]  # no alertmanager.url
    assert shown({"signing_secret": "s3cret", "am": True}) == [
        "alertd_ack", "alertd_resolve", "alertd_silence_1h", "alertd_silence_4h", "alertd_silence_24h"]


def test_a_silence_scopes_by_the_xid_label_alertd_reads_the_code_from():
    """dcgm-exporter's Xid series carries the code as err_code: the silence keeps to that code, and a label
    alertd reads no code from (a site's Xid) scopes nothing unless normalize.xid_labels names it."""
    def dcgm(code: str, **labels: str):
        return alert("DCGMXidErrors", err_code=code, node="n1", gpu="0", UUID="GPU-n1-0", severity="critical",
                     **labels)

    inc = engine().ingest([dcgm("79")], at(0))[0].incident
    assert [matcher_text(m) for m in silence_matchers(inc) if m["name"] == "err_code"] == ['err_code="79"']
    assert not match_all(local_matchers(silence_matchers(inc)), dcgm("48").labels)
    site = alert("SiteXid", Xid="48", node="n1", severity="critical")
    inc = engine().ingest([site], at(0))[0].incident
    assert not any(m["name"] == "Xid" for m in silence_matchers(inc))
    assert [matcher_text(m) for m in silence_matchers(inc, xid_labels=("Xid",)) if m["name"] == "Xid"] == ['Xid="48"']
