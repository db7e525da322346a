"""One lazily opened aiohttp session per HTTP client (integrations, Alertmanager), closed with its owner."""
from __future__ import annotations

import aiohttp


class LazySession:
    """Opens the client session on first use, inside the running loop, and closes it once.

    ``headers`` and ``basic`` (user, password) go with every request of the session."""

    def __init__(self, timeout: float, *, headers: dict[str, str] | None = None,
                 basic: tuple[str, str] | None = None):
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._basic = basic
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout), headers=self._headers,
                auth=aiohttp.BasicAuth(*self._basic) if self._basic else None)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
