"""The reliability page in Chromium (selenium): the hand-built week's figures on the page, every chart drawn by
the vendored Chart.js under the page's Content-Security-Policy, no script error. How fast the page is with a
2,048-node month stored is measured by bench/report_month.py (docs/performance.md)."""
from __future__ import annotations

import pytest

from tests.integration.test_report_service import SINCE, UNTIL, stored_week
from testkit.browser import Browser, By
from testkit.notify_harness import Harness

CHARTS = ("chart-weekly", "chart-out", "chart-causes", "chart-mttr", "chart-cordoned")


@pytest.fixture
def browser():
    b = Browser.start()
    yield b
    b.quit()


async def test_the_report_page_draws_its_figures_and_charts(tmp_path, slack, browser):
    await stored_week(tmp_path)
    h = await Harness(tmp_path, slack=slack).start()
    try:
        d = browser.driver
        await browser.get(str(h.client.make_url(f"/ui/reports/reliability?since={SINCE}&until={UNTIL}")))
        await browser.wait(lambda: d.find_element(By.TAG_NAME, "body").get_attribute("data-charts") == "drawn",
                           what="charts drawn")
        text = {i: d.find_element(By.ID, i).text for i in ("gpu-days", "failures", "rate", "out", "jobs")}
        assert text == {"gpu-days": "336.0", "failures": "4", "rate": f"{4 / 336 * 1000:.3f}", "out": "68.0",
                        "jobs": "0"}
        assert "gpu-node-1 · 2 failures" in d.find_element(By.ID, "lemons").text
        sizes = d.execute_script("return arguments[0].map(id => { const c = document.getElementById(id);"
                                 " return [c.width, c.height, Chart.getChart(c).data.datasets.length]; })", list(CHARTS))
        assert all(w > 0 and hgt > 0 and n > 0 for w, hgt, n in sizes), sizes
        weekly = d.execute_script("return Chart.getChart('chart-weekly').data.datasets.map(s => s.data[0])")
        assert weekly == [round(4 / 336 * 1000, 3), 0.474, 0.278]  # the week and the two Llama 3 reference lines
        errors = [e for e in d.get_log("browser") if e.get("level") == "SEVERE" and "favicon" not in e["message"]]
        assert errors == []
    finally:
        await h.stop()
