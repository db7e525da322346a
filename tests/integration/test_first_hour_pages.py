"""Every empty, muted or unavailable state of the UI says why and what to configure, in a real browser
(headless Chromium): the incident list before the first alert, the quarantine page in the navigation, the
reliability report without a fleet size, and a fleet incident of six nodes whose page is muted by a window,
whose alerts are on its node incidents and whose remediation policy has no Kubernetes API to act through.
The log says each of the muted page and the missing Kubernetes API once."""
from __future__ import annotations

import logging
import shutil

import pytest

from tests.support.browser import Browser, By
from tests.support.notify_harness import ROOT, Harness, hook, wait_for, xid_alert

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


async def test_empty_muted_and_unavailable_states_say_why(tmp_path, browser, caplog):
    caplog.set_level(logging.INFO, logger="alertd")
    h = Harness(tmp_path, routing=ROUTING)  # no Slack, no PagerDuty, no Kubernetes: a first install
    shutil.copy(ROOT / "rules" / "remediation.yml", tmp_path / "rules" / "remediation.yml")
    await h.start()
    try:
        base = str(h.client.make_url("")).rstrip("/")
        d = browser.driver

        # --- before the first alert: the list says how incidents arrive, not that a filter hides them ---
        await browser.get(base + "/ui/incidents")
        await browser.wait(lambda: "No incidents yet" in main_text(d), what="the empty list's hint")
        assert "No incident matches these filters" not in main_text(d)
        assert "POST /api/v1/alerts/alertmanager" in main_text(d)
        await browser.get(base + "/ui/incidents?status=acknowledged")
        await browser.wait(lambda: "No incident matches these filters." in main_text(d), what="filtered empty list")

        # --- the quarantine page: named, and reachable from the navigation ---
        link = await browser.do(d.find_element, By.CSS_SELECTOR, "nav a[href='/ui/quarantine']")
        assert link.text == "Quarantine"
        await browser.do(link.click)
        await browser.wait(lambda: d.title.startswith("Quarantine"), what="the quarantine page")
        assert d.find_element(By.TAG_NAME, "h1").text == "Quarantine"

        # --- the reliability report without a fleet size ---
        await browser.get(base + "/ui/reports/reliability")
        note = await browser.do(d.find_element, By.ID, "no-fleet-size")
        assert "enrich.kube is not configured" in note.text and "GPU-days" in note.text

        # --- six nodes lose a GPU: one fleet incident ---
        for node in NODES:
            await h.post(hook(xid_alert(node), node=node))
        fleet = await wait_for(lambda: _fleet(h), timeout=20)
        await browser.get(base + f"/ui/incidents/{fleet['id']}")
        await browser.wait(lambda: "Alerts (6 firing of 6, on its 6 node incidents)" in main_text(d),
                           what="the fleet's alerts, counted over its nodes")
        rows = d.find_elements(By.CSS_SELECTOR, "#fleet-nodes tbody tr")
        assert sorted(r.find_element(By.CSS_SELECTOR, "td").text for r in rows) == NODES

        # --- muted, and no Kubernetes: both said on the page ---
        text = main_text(d)
        assert "Slack and PagerDuty are not configured" in text
        assert "Route 'errors' to gpu-oncall was muted when it opened (mute window 'all-week'" in text
        assert "enrich.kube is not configured" in d.find_element(By.ID, "no-remediation").text
    finally:
        await h.stop()

    # --- and once each in the log ---
    log = [r.getMessage() for r in caplog.records]
    muted = [m for m in log if m.startswith(f"{fleet['id']} is not posted or paged")]
    assert len(muted) == 1, log
    assert len([m for m in log if m.startswith("no remediation proposed")]) == 1, log


async def _fleet(h: Harness) -> dict | None:
    rows = await h.incidents()
    return next((r for r in rows if r.get("fleet") and len(r.get("nodes", [])) == len(NODES)), None)
