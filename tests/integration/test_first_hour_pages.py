"""Every empty, muted or unavailable state of the UI says why and what to configure, in a real browser
(headless Chromium): the incident list before the first alert, the quarantine page in the navigation, the
reliability report without a fleet size, and a fleet incident of six nodes whose page is muted by a window,
whose alerts are on its node incidents and whose remediation policy has no Kubernetes API to act through.
The log says each of the muted page and the missing Kubernetes API once. One test per state."""
from __future__ import annotations

import logging
import shutil

import pytest

from testkit.browser import Browser, By
from testkit.notify_harness import ROOT, Harness, hook, wait_for, xid_alert

# The shipped routing's shape (an "errors" route muted by windows), with a window that holds all week so
# the test does not depend on the day it runs on; the shipped nights/weekends windows are covered by
# tests/unit/test_first_hour_states.py with an injected clock.
ROUTING = """
routing:
  group_wait: 0s
  receivers:
    - name: gpu-oncall
      slack: "#gpu-oncall"
  routes:
    - name: errors
      match: ['severity=~"critical|error"']
      receiver: gpu-oncall
      mute: [all-week]
  mute_windows:
    - name: all-week
      weekdays: ["monday:sunday"]
"""
NODES = [f"gpu-node-{i:02d}" for i in range(1, 7)]  # min_nodes is 5 in rules/correlation.yml


@pytest.fixture
def browser():
    b = Browser.start()
    yield b
    b.quit()


def main_text(driver) -> str:
    return driver.execute_script("const m = document.querySelector('main'); return m ? m.innerText : '';")


async def first_install(tmp_path) -> Harness:
    """No Slack, no PagerDuty, no Kubernetes: the shipped remediation policy, routing muted all week."""
    h = Harness(tmp_path, routing=ROUTING)
    shutil.copy(ROOT / "rules" / "remediation.yml", tmp_path / "rules" / "remediation.yml")
    return await h.start()


def base_of(h: Harness) -> str:
    return str(h.client.make_url("")).rstrip("/")


async def test_the_empty_list_says_how_incidents_arrive(tmp_path, browser):
    h = await first_install(tmp_path)
    try:
        d = browser.driver
        await browser.get(base_of(h) + "/ui/incidents")
        await browser.wait(lambda: "No incidents yet" in main_text(d), what="the empty list's hint")
        assert "No incident matches these filters" not in main_text(d)
        assert "POST /api/v1/alerts/alertmanager" in main_text(d)
        await browser.get(base_of(h) + "/ui/incidents?status=acknowledged")
        await browser.wait(lambda: "No incident matches these filters." in main_text(d), what="filtered empty list")
    finally:
        await h.stop()


async def test_the_quarantine_page_is_named_and_in_the_navigation(tmp_path, browser):
    h = await first_install(tmp_path)
    try:
        d = browser.driver
        await browser.get(base_of(h) + "/ui/incidents")
        link = await browser.do(d.find_element, By.CSS_SELECTOR, "nav a[href='/ui/quarantine']")
        assert link.text == "Quarantine"
        await browser.do(link.click)
        await browser.wait(lambda: d.title.startswith("Quarantine"), what="the quarantine page")
        assert d.find_element(By.TAG_NAME, "h1").text == "Quarantine"
    finally:
        await h.stop()


async def test_the_reliability_page_says_where_fleet_size_comes_from(tmp_path, browser):
    h = await first_install(tmp_path)
    try:
        await browser.get(base_of(h) + "/ui/reports/reliability")
        note = await browser.do(browser.driver.find_element, By.ID, "no-fleet-size")
        assert "enrich.kube is not configured" in note.text and "GPU-days" in note.text
    finally:
        await h.stop()


async def fleet_page(h: Harness, browser) -> dict:
    """Six nodes lose a GPU: one fleet incident, its page open."""
    for node in NODES:
        await h.post(hook(xid_alert(node), node=node))
    fleet = await wait_for(lambda: _fleet(h), timeout=20)
    await browser.get(base_of(h) + f"/ui/incidents/{fleet['id']}")
    await browser.wait(lambda: fleet["id"] in browser.driver.title, what="the fleet's page")
    return fleet


async def test_a_fleet_page_lists_the_alerts_of_its_nodes(tmp_path, browser):
    h = await first_install(tmp_path)
    try:
        d = browser.driver
        await fleet_page(h, browser)
        assert "Alerts (6 firing of 6, on its 6 node incidents)" in main_text(d)
        rows = d.find_elements(By.CSS_SELECTOR, "#fleet-nodes tbody tr")
        assert sorted(r.find_element(By.CSS_SELECTOR, "td").text for r in rows) == NODES
    finally:
        await h.stop()


async def test_a_muted_page_is_said_on_the_page_and_once_in_the_log(tmp_path, browser, caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    h = await first_install(tmp_path)
    try:
        fleet = await fleet_page(h, browser)
        text = main_text(browser.driver)
        assert "Slack and PagerDuty are not configured" in text
        said = "Posts muted by window 'all-week' (route 'errors' to gpu-oncall) when it opened"  # Slack only
        assert said in text
        notes = (await h.incident(fleet["id"]))["routingNotes"]  # the API, and so the CLI, says it too
        assert notes and notes[0].startswith(said)
    finally:
        await h.stop()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"{fleet['id']} is not posted")]
    assert len(said) == 1, said


async def test_no_kubernetes_no_proposal_said_on_the_page_and_once_in_the_log(tmp_path, browser, caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    h = await first_install(tmp_path)
    try:
        await fleet_page(h, browser)
        note = browser.driver.find_element(By.ID, "no-remediation").text
        assert "Policy 'gpu-off-the-bus'" in note and "enrich.kube is not configured" in note
    finally:
        await h.stop()
    said = [r for r in caplog.records if r.getMessage().startswith("no remediation proposed")]
    assert len(said) == 1, [r.getMessage() for r in said]


async def _fleet(h: Harness) -> dict | None:
    rows = await h.incidents()
    return next((r for r in rows if r.get("fleet") and len(r.get("nodes", [])) == len(NODES)), None)
