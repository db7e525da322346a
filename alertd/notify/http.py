"""One lazily opened aiohttp session per HTTP integration, closed with the notifier."""
from __future__ import annotations

import aiohttp


class LazySession:
    """Opens the client session on first use, inside the running loop, and closes it once."""

    def __init__(self, timeout: float):
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
