"""The web UI in a real browser (headless chromium + selenium): list, filter, act, GPU history, RMA export.

alertd runs in-process with the Slack test server; the scenario is
testkit.ui_scenario (one GPU failing three times on two nodes). With
ALERTD_UI_SCREENSHOTS=DIR the test saves a PNG of each page there (that is how
docs/screenshots/ is made).
"""
from __future__ import annotations

from alertd.core.incident_commands import Annotate
import csv
import io
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from testkit import ui_scenario as sc
from testkit.browser import Browser, By, Keys, StaleElementReferenceException
from testkit.notify_harness import Harness, hook, wait_for
from testkit.webhooks import gpu_alert

KERNEL_LOG = [
    "NVRM: Xid (PCI:0000:ba:00): 48, pid=41877, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 1.",
    "NVRM: Xid (PCI:0000:ba:00): 63, pid=41877, name=python3, Row Remapper: New row marked for remapping, reset gpu to activate.",
]


@pytest.fixture
def browser():
    b = Browser.start()
    yield b
    b.quit()


@pytest.fixture
def shots(tmp_path) -> Path:
    target = Path(os.environ.get("ALERTD_UI_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def ids_in_table(driver) -> list[str]:
    """Read in one script: the live update may replace the rows between two selenium calls."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#rows td:first-child a'), a => a.textContent.trim())")


async def test_the_ui_in_a_browser(tmp_path, slack, browser, shots):
    h = await Harness(tmp_path, slack=slack).start()
    try:
        ids = await sc.build(h)
        await h.svc.run(Annotate(ids["b07"], "log_evidence", KERNEL_LOG, "enrichment", "kernel log: 2 NVRM lines"))
        base = str(h.client.make_url("")).rstrip("/")
        d = browser.driver

        # --- the list, its filters (keyboard only), and a live update ---
        await browser.get(base + "/")
        await browser.wait(lambda: len(ids_in_table(d)) == 5, what="five incidents listed")
        assert ids_in_table(d)[0] == ids["t11"]  # the worst first: of the open critical ones, the newest
        await browser.screenshot(shots / "incidents.png")
        xid = await browser.do(d.find_element, By.ID, "f-xid")
        await browser.do(xid.send_keys, "79", Keys.ENTER)
        await browser.wait(lambda: sorted(ids_in_table(d)) == sorted([ids["a01_1"], ids["a01_2"]]), what="Xid 79 filter")
        assert "xid=79" in d.current_url
        await browser.get(base + "/ui/incidents?status=open")
        before = ids_in_table(d)
        assert ids["a01_1"] not in before and ids["b07"] in before
        now = datetime.now(timezone.utc).replace(microsecond=0)
        await h.post(hook(gpu_alert("prod", "gpu-d04", 2, 8, starts_at=now - timedelta(minutes=2)), node="gpu-d04"))
        fresh = (await wait_for(lambda: _newest(h, len(ids) + 1)))["id"]
        await browser.wait(lambda: fresh in ids_in_table(d), timeout=20, what="the live update to show the new incident")
        assert d.current_url.endswith("/ui/incidents?status=open")  # no reload: the script replaced the rows

        # --- the incident page; acknowledge; Slack shows the edit ---
        await browser.do(click_link, d, ids["b07"])
        await browser.wait(lambda: main_text(d).startswith(f"Incidents › {ids['b07']}"), what="incident page")
        page = d.find_element(By.TAG_NAME, "main").text
        assert "Kernel log evidence" in page and "Row Remapper" in page and "Prometheus" in page
        assert "slack:#gpu-alerts" in page and "Slack message" in page
        await browser.screenshot(shots / "incident.png")
        updates_before = len(slack.calls_of("chat.update"))
        ack = await browser.do(d.find_element, By.CSS_SELECTOR, "button[value=ack]")
        await browser.do(ack.click)
        await browser.wait(lambda: "Done: acknowledged" in main_text(d), what="ack done")
        assert "acknowledged by anonymous" in d.find_element(By.CSS_SELECTOR, "ol.timeline").text
        edit = await wait_for(lambda: _acked_edit(slack, ids["b07"], updates_before), timeout=15)
        assert "Acknowledged" in edit and "anonymous" in edit
        assert (await h.incident(ids["b07"]))["status"] == "acknowledged"

        # --- the GPU page, found by its serial from the header search ---
        search = await browser.do(d.find_element, By.ID, "gpu-find")
        await browser.do(search.send_keys, sc.SERIAL, Keys.ENTER)
        await browser.wait(lambda: f"GPU {sc.MOVED_UUID}" in main_text(d), what="GPU page")
        moves = [li.text.split(" ")[0] for li in d.find_elements(By.CSS_SELECTOR, "ol.moves li")]
        assert moves == ["gpu-a01", "gpu-b07"]
        rows = d.find_elements(By.XPATH, "//section[h2[@id='inc-h']]//tbody/tr")
        assert sorted(r.find_element(By.TAG_NAME, "a").text for r in rows) == sorted([ids["a01_1"], ids["a01_2"], ids["b07"]])
        assert [x.text for x in d.find_elements(By.CSS_SELECTOR, "ol.xid-line .xid")] == ["Xid 79", "Xid 79", "Xid 48", "Xid 63"]
        await browser.screenshot(shots / "gpu.png")

        await browser.get(base + "/ui/nodes/gpu-a01")
        assert "moved" in d.find_element(By.TAG_NAME, "main").text
        await browser.screenshot(shots / "node.png")
        await browser.get(base + "/ui/fleet?days=7")
        assert d.find_elements(By.CSS_SELECTOR, "table.heatmap tbody tr")
        await browser.screenshot(shots / "fleet.png")

        # --- RMA candidates and the CSV export ---
        await browser.get(base + "/ui/rma")
        assert sc.MOVED_UUID in d.find_element(By.CSS_SELECTOR, "section.candidate h2").text
        await browser.screenshot(shots / "rma.png")
        export = await browser.do(d.find_element, By.ID, "export-csv")
        await browser.do(export.click)
        csv_file = browser.downloads / "rma-candidates.csv"
        await browser.wait(lambda: csv_file.exists() and csv_file.stat().st_size > 0, what="the CSV download")
        (row,) = csv.DictReader(io.StringIO(csv_file.read_text()))
        assert (row["uuid"], row["serial"], row["node"]) == (sc.MOVED_UUID, sc.SERIAL, "gpu-b07")
        assert set(row["rules"].split(";")) == {"xid79-repeat", "xid48-and-63"}
    finally:
        await h.stop()


def main_text(driver) -> str:
    """The page's main text, or "" while a navigation is under way (no element to go stale)."""
    return driver.execute_script("const m = document.querySelector('main'); return m ? m.innerText : '';")


def click_link(driver, text: str) -> None:
    """Click a row's link; a live update may replace the row between finding and clicking it: find again."""
    for attempt in range(5):
        try:
            driver.find_element(By.LINK_TEXT, text).click()
            return
        except StaleElementReferenceException:
            if attempt == 4:
                raise


async def _newest(h: Harness, count: int) -> dict | None:
    rows = await h.incidents(sort="newest")
    return rows[0] if len(rows) >= count else None


def _acked_edit(slack, incident_id: str, after: int) -> str:
    for call in slack.calls_of("chat.update")[after:]:
        text = str(call.params.get("blocks", "")) + str(call.params.get("text", ""))
        if incident_id in text and "Acknowledged" in text:
            return text
    return ""
