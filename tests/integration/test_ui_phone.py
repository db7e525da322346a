"""Every page of the web UI at a desktop's 1400 px and a phone's 390 px, in Chromium, with a large storm
stored: nothing is wider than the screen (a table too wide scrolls inside its own box, long ids wrap).

The store holds an Xid 119 storm over STORM_NODES nodes (one fleet incident) and a GPU's third Xid 79 in a
week with its "replace GPU" verdict (testkit.triage_storm), and the pages with the most to say
(testkit.phone_pages): a hot rack's readings and advice, a stalled job's suspect, size and nodes; both
storms grew as their nodes came in, so their pages carry a trend line. With ALERTD_UI_SCREENSHOTS=DIR the test saves the list, the verdict's page
and the hot rack's at both widths there (docs/screenshots/ is made so).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.integration.test_ui_browser import browser, shots  # noqa: F401  (fixtures: Chromium, where PNGs go)
from testkit import phone_pages as pp
from testkit import triage_storm as ts
from testkit.notify_harness import Harness

STORM_NODES = 500
WIDTHS = (1400, 390)
# What sticks out of the viewport, and is not inside a box that scrolls: named for the failure message.
OVERFLOWING = """
const width = window.innerWidth;
function scrolls(el) {
  for (let p = el.parentElement; p; p = p.parentElement) {
    const s = getComputedStyle(p);
    if ((s.overflowX === 'auto' || s.overflowX === 'scroll' || s.overflowX === 'hidden') && p.clientWidth <= width) return true;
  }
  return false;
}
const out = [];
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.width && r.right > width + 0.5 && !scrolls(el)) out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
      + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') + ' ' + Math.round(r.right));
}
return [document.scrollingElement.scrollWidth, width, out.slice(0, 8)];
"""


async def test_every_page_fits_a_phone_and_a_desktop_with_a_large_storm(tmp_path, browser, shots):
    h = await Harness(tmp_path).start()
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        verdict = await ts.replace_gpu(h, now)
        fleet = await ts.storm(h, STORM_NODES, now - timedelta(minutes=3))
        hot = await pp.hot_rack(h, now - timedelta(minutes=6))
        job = await pp.stalled_job(h, now)
        child = fleet["children"][0]
        board = (await h.incident(verdict))["gpus"][0]["uuid"]
        pages = ["/ui/incidents", f"/ui/incidents/{verdict}", f"/ui/incidents/{fleet['id']}",
                 f"/ui/incidents/{fleet['id']}/nodes", f"/ui/incidents/{child}", f"/ui/nodes/{ts.BOARD_NODE}",
                 "/ui/gpus", f"/ui/gpus/{board}", "/ui/fleet", "/ui/rma", "/ui/quarantine", "/ui/reports/reliability",
                 "/ui/login", "/ui/incidents/INC-999999",
                 f"/ui/incidents/{hot}", f"/ui/incidents/{hot}/nodes", f"/ui/incidents/{job}"]
        await says(h, {fleet["id"]: (f"{STORM_NODES} nodes now, ",), hot: ("<dt>Readings</dt>", "<dt>Advice</dt>", "nodes now"),
                       job: (f"({pp.JOB_NODES} nodes)", "suspect gpu-b-0017", "gpu-b-0064")})
        base = str(h.client.make_url("")).rstrip("/")
        for width in WIDTHS:
            await fits(browser, width, base, pages)
            await browser.get(base + "/ui/incidents")
            await browser.do(browser.driver.execute_script, "document.querySelector('details.nodes').open = true")
            await browser.screenshot(shots / f"triage-{width}.png", width)
            await browser.get(base + f"/ui/incidents/{verdict}")
            await browser.screenshot(shots / f"verdict-{width}.png", width)
            await browser.get(base + f"/ui/incidents/{hot}")
            await browser.screenshot(shots / f"hot-rack-{width}.png", width)
    finally:
        await h.stop()


async def says(h: Harness, words_by_incident: dict[str, tuple[str, ...]]) -> None:
    """The incident pages hold what they are in the test for."""
    for incident, words in words_by_incident.items():
        page = await (await h.client.get(f"/ui/incidents/{incident}")).text()
        assert all(w in page for w in words), (incident, [w for w in words if w not in page])


async def fits(browser, width: int, base: str, pages: list[str]) -> None:
    """Each page, its <details> opened, at ``width`` px: nothing sticks out of the viewport."""
    await browser.viewport(width)
    for path in pages:
        await browser.get(base + path)
        await browser.do(browser.driver.execute_script,  # a fleet's node incidents opened too
                         "document.querySelectorAll('details').forEach(d => { d.open = true; })")
        scroll_width, inner, sticking_out = await browser.do(browser.driver.execute_script, OVERFLOWING)
        # a page wider than a phone's screen also makes the phone widen its viewport (and shrink the text)
        assert scroll_width <= inner == width and not sticking_out, \
            f"{path} at {width} px: {scroll_width} px wide in a {inner} px viewport; sticking out: {sticking_out}"
