"""Reload the rules when their files change, so an edited Kubernetes ConfigMap takes effect by itself.

The kubelet updates a ConfigMap mounted as a directory by swapping a symlink (``..data``) to a new
directory: every file keeps its name and gets a new inode. A ``subPath`` mount is never updated, which is
why the chart mounts directories. Polling the files' identities every few seconds sees that swap, an
edit in place, and a file added or removed, on any filesystem and without inotify; reading the stats of a
dozen files costs microseconds.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Awaitable, Callable, Sequence

from alertd.rules.ruleset import rule_files

log = logging.getLogger(__name__)
EVERY = 10.0  # seconds between looks; the kubelet itself takes up to a minute to update a ConfigMap volume

Signature = tuple[tuple[str, int, int, int], ...]


def signature(paths: Sequence[str]) -> Signature:
    """Which rule files there are and which version of each (stat follows the kubelet's symlinks)."""
    out = []
    for path in rule_files(list(paths)):
        try:
            st = os.stat(path)
        except OSError:
            out.append((str(path), 0, 0, 0))  # gone meanwhile: the next look sees what replaced it
            continue
        out.append((str(path), st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


async def watch_rules(paths: Callable[[], Sequence[str]], reload: Callable[[], object], *, every: float = EVERY,
                      sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Call ``reload`` (what SIGHUP does) whenever the signature of the rule files changes; runs until
    cancelled. A change seen while the files are half written reloads again at the next look."""
    seen = signature(paths())
    while True:
        await sleep(every)
        now = signature(paths())
        if now != seen:
            log.info("rule files changed; reloading the rules")
            seen = now
            reload()


class RuleWatcher:
    """The watch as a part of ``alertd serve``: ``reload`` is what SIGHUP runs (rules, credentials, certificate,
    the receivers), so a changed file reloads the whole group."""

    name = "rule watcher"

    def __init__(self, paths: Callable[[], Sequence[str]], reload: Callable[[], object], every: float = EVERY):
        self.paths, self.reload, self.every = paths, reload, every
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(watch_rules(self.paths, self.reload, every=self.every),
                                                            name="alertd-rule-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
