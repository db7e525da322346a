"""The RMA handoff end to end: an approved RMA step opens exactly one Jira issue and one signed webhook call
carrying the evidence (GPU UUID, serial, PCI address, Xid history with times, kernel log), also after a
restart on the same store, after a crash between Jira's answer and the record, and with two replicas on one
store (SQLite and PostgreSQL). Jira and the webhook are loopback servers written to their documented
contracts (testkit/jira_server.py)."""
from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.core.incident_commands import Annotate
from alertd.app.rma_handoff import RmaHandoff, build_systems
from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.core.findings import LOG_EVIDENCE
from alertd.core.model import Incident
from alertd.core.tickets import RmaEvidence, TicketLink
from alertd.integrations.jira import JiraTickets
from alertd.integrations.tickets import JiraSettings, RmaSettings, TicketError
from alertd.rules.ruleset import load_rules
from alertd.store.facade import SqlStore
from alertd.store.sqlite import SqliteStore
from alertd.web.keys import SERVICE
from tests.integration.test_auth import HOOK_TOKEN, TOKENS, auth_doc, bearer
from tests.integration.test_service_inprocess import EXAMPLE, HOOK, ROOT, wait_for
from testkit.jira_server import EMAIL, TOKEN, JiraServer, RmaWebhookServer
from testkit.served import served
from testkit.stores import make_store  # noqa: F401  (fixture)

SECRET = "rma-webhook-secret-0123456789"
UUID = "GPU-8f6e2c1a-4b7d-4e0f-9a3c-2d1e5f7a9b0c"
SERIAL = "1654922009381"  # a board serial, as an exporter's serial label carries it
NVRM = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python3, GPU has fallen off the bus."
ACT = bearer(TOKENS["oncall"][1])


def rules_dir(tmp_path: Path) -> Path:
    """The shipped rules, with the remediation policy out of dry run (the RMA step opens real tickets)."""
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules, ignore=shutil.ignore_patterns("tests"))
    policy = rules / "remediation.yml"
    policy.write_text(policy.read_text().replace("  dry_run: true", "  dry_run: false"))
    return rules


def config(tmp_path: Path, jira: JiraServer, hook: RmaWebhookServer, token: str = TOKEN) -> dict[str, Any]:
    return {**auth_doc(tmp_path), "rules": {"paths": [str(rules_dir(tmp_path))]},
            "external_url": "https://alertd.example.com",
            "rma": {"jira": {"url": jira.url, "email": EMAIL, "api_token": token, "project": "HW",
                             "labels": ["gpu-rma", "alertd"]},
                    "webhook": {"url": f"{hook.url}/rma", "signing_secret": SECRET}, "timeout": "5s"}}


async def start(tmp_path: Path, doc: dict[str, Any]) -> TestClient:
    cfg = parse_config(doc, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return client


def example_with_serial() -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    body["alerts"][0]["labels"]["serial"] = SERIAL
    return body


async def open_incident(client: TestClient) -> str:
    assert (await client.post(HOOK, json=example_with_serial(), headers=bearer(HOOK_TOKEN))).status == 200

    async def one() -> list:
        return (await (await client.get("/api/v1/incidents", headers=ACT)).json())["incidents"]
    incident: str = (await wait_for(one))[0]["id"]
    svc = client.server.app[SERVICE]
    await svc.run(Annotate(incident, LOG_EVIDENCE, [{"time": "2026-12-06T09:00:01Z", "host": "gpu-node-17",
                                                 "line": NVRM}], "enrichment"))
    return incident


async def incident_json(client: TestClient, incident: str) -> dict[str, Any]:
    return dict(await (await client.get(f"/api/v1/incidents/{incident}", headers=ACT)).json())


async def tickets_shown(client: TestClient, incident: str, n: int = 2) -> list[dict[str, Any]]:
    async def shown() -> list:
        tickets = (await incident_json(client, incident)).get("tickets") or []
        return tickets if len(tickets) >= n else []
    return list(await wait_for(shown))


def assert_evidence(jira: JiraServer, hook: RmaWebhookServer, incident: str) -> None:
    (fields,) = jira.issues.values()
    text = str(fields["description"])
    for needle in (f"GPU UUID: {UUID}", f"Serial: {SERIAL}", "PCI address: 0000:3b:00", " Xid 79 (",
                   "GPU has fallen off the bus", incident):
        assert needle in text, needle
    assert {"gpu-rma", "alertd"} <= set(fields["labels"]) and any(lb.startswith("alertd-rma-") for lb in fields["labels"])
    (call,) = hook.calls
    ev = call["body"]["evidence"]
    assert (ev["gpuUuid"], ev["serial"], ev["pciBusId"]) == (UUID, SERIAL, "0000:3b:00")
    assert [x["xid"] for x in ev["xidHistory"]] == [79] and ev["xidHistory"][0]["at"]
    assert any("fallen off the bus" in line for line in ev["kernelLog"])
    assert call["delivery"] == f"rma/{call['body']['ticket']}"


async def test_the_jira_stand_in_refuses_what_jira_refuses() -> None:
    async with JiraServer() as jira, aiohttp.ClientSession() as http:
        good = "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
        fields = {"project": {"key": "HW"}, "issuetype": {"name": "Task"}, "summary": "RMA GPU-1",
                  "description": {"type": "doc", "version": 1, "content": []}, "labels": ["gpu-rma"]}
        url = f"{jira.url}/rest/api/3/issue"
        async with http.post(url, json={"fields": fields}, headers={"Authorization": "Basic bm9ib2R5Og=="}) as r:
            assert r.status == 401
        cases = {"labels": {**fields, "labels": ["gpu rma"]}, "project": {**fields, "project": {"key": "NOPE"}},
                 "description": {**fields, "description": "plain text"}, "summary": {**fields, "summary": ""}}
        for field, bad in cases.items():
            async with http.post(url, json={"fields": bad}, headers={"Authorization": good}) as r:
                body = await r.json()
                assert r.status == 400 and body["errorMessages"] == [] and field in body["errors"], (field, body)
        async with http.post(url, json={"fields": fields}, headers={"Authorization": good}) as r:
            created = await r.json()
            assert r.status == 201 and created["key"] == "HW-1" and created["self"].endswith(created["id"])
        bad = JiraTickets(JiraSettings(jira.url or "", EMAIL, "wrong-token", "HW"), 5.0)
        with pytest.raises(TicketError) as exc:
            await bad.find(_evidence())
        assert "HTTP 401" in str(exc.value) and not exc.value.retry
        await bad.close()


def _evidence() -> RmaEvidence:
    return RmaEvidence("INC-1", "Xid 79", "prod-a", "gpu-node-17", UUID)


async def test_an_approved_rma_opens_one_issue_and_one_call_also_after_a_restart(tmp_path: Path) -> None:
    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        doc = config(tmp_path, jira, hook)
        client = await start(tmp_path, doc)
        try:
            incident = await open_incident(client)
            resp = await client.post(f"/api/v1/incidents/{incident}/rma", headers=ACT)
            assert resp.status == 200, await resp.text()
            tickets = await tickets_shown(client, incident)
            assert {t["system"] for t in tickets} == {"jira", "webhook"}
            (link,) = [t for t in tickets if t["system"] == "jira"]
            assert link["url"] == f"{jira.url}/browse/HW-1" and link["gpu"] == UUID
            again = await client.post(f"/api/v1/incidents/{incident}/rma", headers=ACT)
            assert again.status == 409 and "already" in (await again.json())["error"]
        finally:
            await client.close()
        assert len(jira.issues) == 1 and len(hook.calls) == 1
        assert_evidence(jira, hook, incident)

        client = await start(tmp_path, doc)  # the same store: the step is done, nothing is opened again
        try:
            svc = client.server.app[SERVICE]
            rem = await svc.store.get_remediation(f"{incident}/rma")
            assert rem is not None and rem["state"] == "done"
            rem["state"], rem["version"] = "approved", rem["version"] + 1  # as if it had to run again
            assert await svc.store.put_remediation(rem, rem["version"] - 1)
            svc.remediation._wake.set()

            async def done_again() -> bool:
                latest = await svc.store.get_remediation(f"{incident}/rma")
                return bool(latest and latest["state"] == "done")
            await wait_for(done_again)
            assert len((await incident_json(client, incident))["tickets"]) == 2
        finally:
            await client.close()
        assert len(jira.issues) == 1 and len(hook.calls) == 1 and len(jira.creates) == 1


async def test_a_crash_between_jiras_answer_and_the_record_finds_the_issue_instead(tmp_path: Path) -> None:
    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        jira.lose_reply_next()  # the issue is created; its answer never arrives
        client = await start(tmp_path, config(tmp_path, jira, hook))
        try:
            incident = await open_incident(client)
            assert (await client.post(f"/api/v1/incidents/{incident}/rma", headers=ACT)).status == 200
            tickets = await tickets_shown(client, incident)
            (link,) = [t for t in tickets if t["system"] == "jira"]
            assert link["key"] == "HW-1"
        finally:
            await client.close()
        assert len(jira.issues) == 1 and len(jira.creates) == 1 and len(jira.searches) == 1
        assert len(hook.calls) == 1


async def test_a_refused_issue_fails_the_step_with_jiras_reason(tmp_path: Path) -> None:
    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        doc = config(tmp_path, jira, hook, token="revoked-token")
        del doc["rma"]["webhook"]
        client = await start(tmp_path, doc)
        try:
            incident = await open_incident(client)
            assert (await client.post(f"/api/v1/incidents/{incident}/rma", headers=ACT)).status == 200
            svc = client.server.app[SERVICE]

            async def failed() -> dict:
                rem = await svc.store.get_remediation(f"{incident}/rma")
                return rem if rem and rem["state"] == "failed" else {}
            rem = await wait_for(failed)
            assert "HTTP 401" in rem["reason"]
        finally:
            await client.close()
        assert jira.issues == {}


def incident_of() -> Incident:
    now = datetime.now(timezone.utc)
    return Incident(id="INC-7", key="k", group="g", title="Xid 79", severity="critical", category="gpu",
                    status="open", opened_at=now, updated_at=now, cluster="prod-a", node="gpu-node-17",
                    gpus=[{"uuid": UUID, "serial": SERIAL, "pci_bus_id": "00000000:3B:00.0"}],
                    annotations={LOG_EVIDENCE: [{"time": "2026-12-06T09:00:01Z", "host": "gpu-node-17",
                                                 "line": NVRM}]})


async def test_two_replicas_on_one_store_open_one_ticket(make_store: Callable[[], SqlStore]) -> None:  # noqa: F811
    stores = [make_store(), make_store()]
    for store in stores:
        await store.open()
    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        jira.delay = 0.2  # both replicas ask while the first create is in flight
        settings = RmaSettings.from_doc({"jira": {"url": jira.url, "email": EMAIL, "api_token": TOKEN, "project": "HW"},
                                         "webhook": {"url": f"{hook.url}/rma", "signing_secret": SECRET}})
        links: list[tuple[str, TicketLink]] = []

        async def link(incident_id: str, ticket: TicketLink) -> None:
            links.append((incident_id, ticket))
        replicas = [RmaHandoff(store, build_systems(settings), holder=f"replica-{i}",
                               clock=lambda: datetime.now(timezone.utc), link=link)
                    for i, store in enumerate(stores)]
        try:
            first = await asyncio.gather(*(r.open(incident_of(), "3rd Xid 79", dry_run=False) for r in replicas))
            later = [await r.open(incident_of(), "3rd Xid 79", dry_run=False) for r in replicas]
        finally:
            for r in replicas:
                await r.close()
            for store in stores:
                await store.close()
        assert len(jira.issues) == 1 and len(hook.calls) == 1
        assert all(r["ok"] for results in later for r in results), later
        opened = [r["target"] for results in first for r in results
                  if r["result"].startswith("opened ") and not r["result"].startswith("opened before")]
        assert sorted(opened) == ["jira", "webhook"]  # one issue and one call, whichever replica won each
        assert {t.key for _, t in links if t.system == "jira"} == {"HW-1"}


def _example_as(alertname: str, xid: str | None) -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    body["alerts"] = body["alerts"][:1]
    labels = body["alerts"][0]["labels"]
    labels["alertname"], labels["severity"] = alertname, "warning"
    body["alerts"][0]["fingerprint"] = hashlib.sha256(f"{alertname}{xid}".encode()).hexdigest()[:16]
    if xid is None:
        labels.pop("xid")
    else:
        labels["xid"] = xid
    return body


async def test_rma_is_offered_only_for_a_hardware_fault_and_asks_first(tmp_path: Path) -> None:
    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        client = await start(tmp_path, config(tmp_path, jira, hook))
        try:
            incident = await open_incident(client)  # Xid 79: the GPU fell off the bus
            page = await (await client.get(f"/ui/incidents/{incident}", headers=ACT)).text()
            assert 'value="confirm-rma"' in page and 'value="rma"' not in page  # the first press asks again
            page = await (await client.get(f"/ui/incidents/{incident}?confirm=rma", headers=ACT)).text()
            assert 'id="rma-confirm"' in page and f"GPU {UUID} of gpu-node-17 to the vendor?" in page
            assert "Tickets open in jira, webhook." in page and 'value="rma"' in page
            for alertname, xid in (("GPUTemperatureHigh", None), ("GPUXidError", "13")):
                doc = _example_as(alertname, xid)
                doc["alerts"][0]["labels"]["node"] = node = f"gpu-node-{alertname[-4:]}"
                assert (await client.post(HOOK, json=doc, headers=bearer(HOOK_TOKEN))).status == 200

                async def opened() -> list:
                    found = (await (await client.get(f"/api/v1/incidents?node={node}", headers=ACT)).json())
                    return found["incidents"]
                (other,) = await wait_for(opened)
                resp = await client.post(f"/api/v1/incidents/{other['id']}/rma", headers=ACT)
                assert resp.status == 409 and "nothing to return to the vendor" in (await resp.json())["error"]
                page = await (await client.get(f"/ui/incidents/{other['id']}", headers=ACT)).text()
                assert "RMA handoff" not in page
            assert jira.issues == {}
        finally:
            await client.close()


async def test_no_rma_button_without_a_ticket_target(tmp_path: Path) -> None:
    client = await start(tmp_path, {**auth_doc(tmp_path), "rules": {"paths": [str(rules_dir(tmp_path))]}})
    try:
        incident = await open_incident(client)
        page = await (await client.get(f"/ui/incidents/{incident}", headers=ACT)).text()
        assert "RMA handoff" not in page
        resp = await client.post(f"/api/v1/incidents/{incident}/rma", headers=ACT)
        assert resp.status == 409 and "no ticket target is configured" in (await resp.json())["error"]
    finally:
        await client.close()


async def test_the_rma_confirmation_reads_at_desktop_and_phone_widths(tmp_path: Path) -> None:
    """Chromium at 1400 px and 390 px: the page's RMA handoff asks again, the question and its button fit the
    width, and the confirmation opens the tickets."""
    from testkit.browser import Browser, By

    async with JiraServer() as jira, RmaWebhookServer(SECRET) as hook:
        doc = config(tmp_path, jira, hook)
        for key in ("api", "receiver"):  # a loopback alertd without tokens: the browser needs no login
            doc.pop(key, None)
        client = await start(tmp_path, doc)
        browser = Browser.start()
        try:
            assert (await client.post(HOOK, json=example_with_serial())).status == 200

            async def one() -> list:
                return (await (await client.get("/api/v1/incidents")).json())["incidents"]
            incident = (await wait_for(one))[0]["id"]
            d, url = browser.driver, str(client.make_url(f"/ui/incidents/{incident}"))
            script = """const q = document.getElementById('rma-confirm'); if (!q) return null;
                const r = q.getBoundingClientRect(), b = document.getElementById('rma-handoff').getBoundingClientRect();
                return [r.right <= window.innerWidth + 1, b.right <= window.innerWidth + 1 && b.width > 0];"""
            for width in (1400, 390):
                await browser.do(d.set_window_size, width, 900)
                await browser.get(url)
                ask = await browser.wait(lambda: d.find_elements(By.ID, "rma-handoff-ask"), what="RMA handoff…")
                await browser.do(ask[0].click)
                fits = await browser.wait(lambda: d.execute_script(script), what="the RMA question")
                assert fits == [True, True], f"the RMA question overflows {width} px"
            await browser.do(lambda: d.find_element(By.ID, "rma-handoff").click())
            await wait_for(lambda: jira.issues, timeout=15)
        finally:
            browser.quit()
            await client.close()
