"""A real browser for the web UI tests: Debian's chromium, headless, driven by selenium through chromedriver.

Every selenium call blocks, so async tests run them in a thread (``await b.do(fn)``):
the event loop keeps serving the in-process alertd and the Slack test server meanwhile.
Chromium runs with a fresh profile, no sandbox (CI runs as root), no GPU, and no
background network (updates, sync, component downloads): only loopback traffic.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from testkit.missing import missing_service
from testkit.process import ServiceUnavailable, find_binary

try:  # optional: without selenium the browser tests skip (fail under CI) instead of breaking collection
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:
    webdriver = Service = By = Keys = None  # type: ignore[assignment,misc]

    class StaleElementReferenceException(Exception):  # type: ignore[no-redef]
        """Stands in for selenium's, so ``except`` clauses still compile; never raised."""

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--window-size=1400,1000", "--force-device-scale-factor=1")


class Browser:
    def __init__(self, driver: Any, profile: Path, downloads: Path):
        self.driver, self.profile, self.downloads = driver, profile, downloads

    @classmethod
    def start(cls) -> "Browser":
        try:
            if webdriver is None:
                raise ServiceUnavailable("selenium is not installed (it is in the test extra: pip install -e '.[test]')")
            chromium = find_binary("chromium", "chromium-browser")
            chromedriver = find_binary("chromedriver")
        except ServiceUnavailable as exc:
            missing_service(str(exc))
            raise
        os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download anything
        profile = Path(tempfile.mkdtemp(prefix="alertd-chromium-"))
        downloads = profile / "downloads"
        downloads.mkdir()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile / 'profile'}")
        options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                                  "download.prompt_for_download": False})
        driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
        driver.set_page_load_timeout(30)
        return cls(driver, profile, downloads)

    async def do(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def get(self, url: str) -> None:
        await self.do(self.driver.get, url)

    async def wait(self, predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = await self.do(predicate)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"browser: {what} not met within {timeout} s at {self.driver.current_url}")
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path, width: int = 1400) -> None:
        """A full-page PNG (through the DevTools protocol: the viewport grows to the document's height)."""
        import base64

        height = await self.do(self.driver.execute_script, "return document.documentElement.scrollHeight")
        shot = await self.do(self.driver.execute_cdp_cmd, "Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(int(height), 2400), "scale": 1}})
        path.write_bytes(base64.b64decode(shot["data"]))

    async def viewport(self, width: int, height: int = 900) -> None:
        """Lay pages out as a device this wide does (a phone: 390 CSS pixels, the viewport meta tag honoured)."""
        await self.do(self.driver.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800})

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
