"""An alert storm against a live ``alertd serve``, with the database's disk use sampled every 0.5 s.

``nodes`` webhooks of 8 GPU alerts each (one node each, as dcgm-exporter and
Alertmanager send them), posted over ``conns`` keep-alive connections; a
sampler thread records the WAL file's size and the data directory's total size
every ``interval`` seconds from the first post until the engine has drained the
inbox (bounded by ``timeout``). Shared by the storm test and bench/disk_storm.py.
"""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from alertd.store.sqlite import LOG_QUIET
from testkit.alertd_proc import AlertdProcess, open_readonly
from testkit.webhooks import UniqueWebhooks, dumps

ALERTS_PER_WEBHOOK = 8


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def dir_bytes(path: Path) -> int:
    """Bytes allocated on disk (st_blocks), what a volume quota counts."""
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_blocks * 512
        except OSError:  # a file removed while walking (the WAL after a checkpoint, a journal)
            pass
    return total


@dataclass
class StormSizes:
    alerts: int = 0
    posted_s: float = 0.0
    drained_s: float = 0.0
    errors: int = 0
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, wal bytes, data dir bytes)

    @property
    def peak_wal(self) -> int:
        return max((w for _, w, _ in self.samples), default=0)

    @property
    def peak_dir(self) -> int:
        return max((d for _, _, d in self.samples), default=0)

    @property
    def final_dir(self) -> int:
        return self.samples[-1][2] if self.samples else 0

    def per_alert(self) -> float:
        return self.final_dir / max(1, self.alerts)

    def summary(self) -> str:
        mb = 1024 * 1024
        return (f"{self.alerts} alerts posted in {self.posted_s:.1f} s, drained after {self.drained_s:.1f} s "
                f"({self.errors} errors); {len(self.samples)} samples: peak WAL {self.peak_wal / mb:.1f} MB, "
                f"peak data dir {self.peak_dir / mb:.1f} MB, final data dir {self.final_dir / mb:.1f} MB "
                f"= {self.per_alert():.0f} bytes per alert")


class Sampler(threading.Thread):
    def __init__(self, data_dir: Path, wal: Path, interval: float, out: StormSizes):
        super().__init__(name="disk-sampler", daemon=True)
        self.data_dir, self.wal, self.interval, self.out = data_dir, wal, interval, out
        self.stop = threading.Event()
        self.started_at = time.monotonic()

    def sample(self) -> None:
        self.out.samples.append((time.monotonic() - self.started_at, _size(self.wal), dir_bytes(self.data_dir)))

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.sample()


def _log_tidied(server: AlertdProcess) -> bool:
    """The inbox log empty, its free pages given back and its WAL truncated. Each part alone is not enough:
    the WAL is also truncated (but the pages kept) when it outgrows LOG_WAL_LIMIT while the taken webhooks
    are deleted, and before they are there are no free pages yet."""
    if _size(Path(f"{server.db_path}-inbox-wal")):
        return False
    conn = open_readonly(f"{server.db_path}-inbox")  # a moment's read: a truncation waits for it, or retries
    try:
        return conn.execute("SELECT count(*) FROM inbox_log").fetchone()[0] == 0 and \
            conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        conn.close()


async def _post_all(url: str, bodies: list[bytes], conns: int, headers: dict[str, str]) -> int:
    errors = 0
    queue = list(reversed(bodies))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conns)) as session:
        async def worker() -> None:
            nonlocal errors
            while queue:
                body = queue.pop()
                for _ in range(20):  # 503 (store busy) is retried like Alertmanager does, bounded
                    async with session.post(url, data=body, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=60)) as resp:
                        await resp.read()
                        if resp.status == 200:
                            break
                        await asyncio.sleep(0.2)
                else:
                    errors += 1
        await asyncio.gather(*(worker() for _ in range(conns)))
    return errors


def run_storm(server: AlertdProcess, nodes: int, *, conns: int = 16, interval: float = 0.5,
              timeout: float = 600.0, headers: dict[str, str] | None = None, run: str = "storm") -> StormSizes:
    """Post the storm, sample sizes until the inbox is drained (or ``timeout``), then take a last sample."""
    gen = UniqueWebhooks(run=run, distinct_nodes=True, seed=11)
    bodies = [dumps(gen.next()) for _ in range(nodes)]
    out = StormSizes(alerts=nodes * ALERTS_PER_WEBHOOK)
    sampler = Sampler(server.data_dir, Path(f"{server.db_path}-wal"), interval, out)
    sampler.start()
    started = time.monotonic()
    try:
        out.errors = asyncio.run(_post_all(server.receiver_url, bodies, conns,
                                           {"Content-Type": "application/json", **(headers or {})}))
        out.posted_s = time.monotonic() - started
        server.wait_drained(max(1.0, timeout - out.posted_s))
        out.drained_s = time.monotonic() - started
        # The engine tidies the inbox log (its free pages back, then its WAL truncated) once it has been
        # quiet for LOG_QUIET, at its next idle round (about once a second): wait for that, then a sample.
        deadline = time.monotonic() + LOG_QUIET + 10.0
        while not _log_tidied(server) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        sampler.stop.set()
        sampler.join(5)
    sampler.sample()
    return out
