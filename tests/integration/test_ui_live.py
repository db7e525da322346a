"""Live updates in a real browser (headless chromium): the incident page refreshes itself, and a session that
ended sends the browser to the login page instead of filling the page with it while saying "Updated"."""
from __future__ import annotations

import pytest

from alertd.config.settings import parse_config
from testkit.browser import Browser
from testkit.notify_harness import Harness, hook, xid_alert

ACTOR = "act0r-t0ken-0123456789"


@pytest.fixture
def browser():
    b = Browser.start()
    yield b
    b.quit()


async def locked(tmp_path) -> Harness:
    h = Harness(tmp_path)
    doc = dict(h.cfg.raw)
    doc["api"] = {"auth": {"tokens": [{"name": "oncall", "role": "act", "token": ACTOR}]}}
    h.cfg = parse_config(doc, "test")
    await h.start()
    h.client.session.headers["Authorization"] = f"Bearer {ACTOR}"  # the test's own API calls
    return h


def text(driver, selector: str) -> str:
    return driver.execute_script(f"const e = document.querySelector({selector!r}); return e ? e.innerText : '';")


async def test_the_incident_page_updates_itself_and_an_ended_session_goes_to_login(tmp_path, browser):
    h = await locked(tmp_path)
    try:
        await h.post(hook(xid_alert("gpu-node-7", 1), node="gpu-node-7"))
        inc = await h.one_incident()
        base, d = str(h.client.make_url("")).rstrip("/"), browser.driver
        page = f"/ui/incidents/{inc['id']}"
        await browser.get(f"{base}/ui/login?next={page}")
        token = await browser.do(d.find_element, "name", "token")
        await browser.do(token.send_keys, ACTOR)
        await browser.do(token.submit)
        await browser.wait(lambda: d.current_url.endswith(page), what="the incident page after the login")
        await browser.do(d.execute_script, "window.notReloaded = true;")

        await h.post(hook(xid_alert("gpu-node-7", 5), node="gpu-node-7"))  # a second GPU joins the incident
        await browser.wait(lambda: "(GPU 5)" in text(d, "#live-incident"), timeout=20,
                           what="the new member on the page without a reload")
        assert d.execute_script("return window.notReloaded === true;") and d.current_url.endswith(page)
        assert text(d, "#live-status").startswith("Updated")

        await browser.do(d.execute_script, "fetch('/ui/logout', {method: 'POST', credentials: 'same-origin'});")
        await browser.wait(lambda: "/ui/login" in d.current_url, timeout=20, what="the login page")
        assert d.current_url.endswith("/ui/login?next=" + page.replace("/", "%2F"))
        assert "Live updates" not in text(d, "main")
    finally:
        await h.stop()
