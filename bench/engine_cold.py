"""A cold storm through the engine, the router and the step commit, in one process: CPU per webhook.

    python -m bench.engine --cold                      # 10,000 never-seen nodes, 32 webhooks per step
    python -m bench.engine --cold --nodes 2000 --step 8
    python -m bench.engine --cold --profile /tmp/cold.prof   # cProfiles: engine+router, and .store

The webhooks are bench/ha.py's cold storm (testkit/webhooks.py, one webhook of 8 GPU alerts per node
never seen before, 4 clusters), parsed as the receiver parses them. Each step goes through what the
service's processor does after receiving: ``Engine.ingest`` on the shipped rules, ``route_step`` on the
router the default config builds, and ``commit_step`` on a real SQLite store (synchronous=FULL) in a
temporary directory. Receiving (parsing, inbox append) is done untimed before each step.

Per part it prints microseconds of CPU per webhook: engine and router are the processor thread's CPU,
store is the store thread's CPU for the step's commit (not the fsync wait), split into the Python that
encodes the rows and the calls into SQLite (statements, commit, WAL checkpoints). Over all nodes and for the first and the last 1,000, so cost that grows with a storm shows. Then
the stored bytes per alert of the main tables, so an encoding change that grows the data shows too.
"""
from __future__ import annotations

import asyncio
import cProfile
import gc
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from alertd.config.settings import parse_config
from alertd.engine.memory import DETAILED_EVENTS
from alertd.engine.pipeline import Engine
from alertd.app.notifiers import build_router
from alertd.receive.payload import delivery_key, read_notification
from alertd.rules.ruleset import load_rules
from alertd.store.base import InboxKey, Step, Taken
from alertd.store.sqlite import SqliteStore
from testkit.webhooks import UniqueWebhooks, dumps

PARTS = ("engine", "router", "store", "sqlite")
WINDOW = 1000  # nodes in the first and last slices reported


@dataclass
class Cost:
    """CPU seconds per part, per step, with the webhooks each step held."""

    steps: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def per_webhook(self, first: int, last: int) -> dict[str, float]:
        """Microseconds per webhook over the steps whose webhooks lie in [first, last)."""
        total = {p: 0.0 for p in PARTS}
        count, done = 0, 0
        for n, cpu in self.steps:
            if first <= done < last:
                count += n
                for p in PARTS:
                    total[p] += cpu[p]
            done += n
        return {p: total[p] / max(count, 1) * 1e6 for p in PARTS}


class _TimedSqlite:
    """A connection (or cursor) whose SQLite calls add their thread CPU to ``sink[0]``: the store's part
    spent in SQLite itself, apart from building the rows in Python."""

    def __init__(self, inner: Any, sink: list[float]):
        self._inner, self._sink = inner, sink

    def cursor(self) -> "_TimedSqlite":
        return _TimedSqlite(self._inner.cursor(), self._sink)

    def _timed(self, name: str, *args: Any) -> Any:
        started = time.thread_time()
        try:
            return getattr(self._inner, name)(*args)
        finally:
            self._sink[0] += time.thread_time() - started

    def execute(self, *args: Any) -> Any:
        return self._timed("execute", *args)

    def executemany(self, *args: Any) -> Any:
        return self._timed("executemany", *args)

    def commit(self) -> Any:
        return self._timed("commit")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _timed_on_store_thread(store: SqliteStore, sink: list[float], profiler: cProfile.Profile | None) -> list[bool]:
    """Record the store thread's CPU for each call made while the returned flag is set (the step commit)."""
    inner = store.db._on_thread
    measuring = [False]

    def run(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if not measuring[0]:
            return inner(fn, args)
        started = time.thread_time()
        if profiler:
            profiler.enable()
        try:
            return inner(fn, args)
        finally:
            if profiler:
                profiler.disable()
            sink.append(time.thread_time() - started)
    store.db._on_thread = run  # type: ignore[method-assign]
    return measuring


async def cold_storm(nodes: int, step: int, work: Path,
                     profilers: tuple[cProfile.Profile, cProfile.Profile] | None = None) -> tuple[Cost, dict[str, float], int]:
    cfg = parse_config({"log": {"level": "warning"}}, "bench")
    rules = load_rules(cfg.rule_paths)
    store = SqliteStore(work / "alertd.db")
    await store.open()
    store_cpu: list[float] = []
    in_sqlite = [0.0]
    store.db._conn = _TimedSqlite(store.db._conn, in_sqlite)
    measuring = _timed_on_store_thread(store, store_cpu, profilers[1] if profilers else None)
    engine = Engine(rules, cfg.normalize, await store.load_state())
    router = build_router(cfg, rules)
    router.restore(await store.load_router_memory())
    gen = UniqueWebhooks(run="storm", nodes=nodes, distinct_nodes=True, seed=7)
    now = gen.start + timedelta(hours=1)
    docs = [dumps(gen.next()) for _ in range(nodes)]
    cost = Cost()
    try:
        for k in range(0, nodes, step):
            chunk = docs[k:k + step]
            alerts = []
            appends = []
            for body in chunk:  # what the receiver does (alertd/app/service.py receive), untimed
                now += timedelta(microseconds=500)  # 2,000 webhooks/s
                hook = read_notification(body, now).alerts
                alerts += hook
                appends.append(store.append_hook(body, now, len(hook)))
            taken = Taken(list(await asyncio.gather(*appends)), [InboxKey(delivery_key(a), now) for a in alerts])
            if profilers:
                profilers[0].enable()
            t0 = time.thread_time()
            changes = engine.ingest(alerts, now)
            t1 = time.thread_time()
            items, memory = router.route_step(changes, now)
            t2 = time.thread_time()
            if profilers:
                profilers[0].disable()
            state = engine.state
            measuring[0] = True
            await store.commit_step(Step(inbox=taken, changes=changes, outbox=items,
                                         next_seq=state.next_seq, heartbeat_at=state.heartbeat_at, memory=memory))
            measuring[0] = False
            for c in changes:
                del c.incident.timeline[:-DETAILED_EVENTS]  # as the processor trims each committed incident
            cost.steps.append((len(chunk), {"engine": t1 - t0, "router": t2 - t1, "store": store_cpu.pop(),
                                            "sqlite": in_sqlite[0]}))
            in_sqlite[0] = 0.0
        sizes = await store.db.run(_stored_bytes, store)
    finally:
        await store.close()
    return cost, sizes, len(engine.state.incidents)


def _stored_bytes(store: SqliteStore) -> dict[str, float]:
    """Bytes of the rows per table (every column's stored length, not pages), from SQLite itself."""
    tables = [r[0] for r in store.db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")]
    sizes = {t: _table_bytes(store, t) for t in tables}
    return {t: v for t, v in sorted(sizes.items(), key=lambda kv: -kv[1]) if v}


def _table_bytes(store: SqliteStore, table: str) -> float:
    columns = [r[1] for r in store.db.query(f"PRAGMA table_info({table})")]
    expr = " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
    return float(store.db.query(f"SELECT coalesce(sum({expr}), 0) FROM {table}")[0][0])


def report(nodes: int, step: int, profile: str = "") -> None:
    with tempfile.TemporaryDirectory(prefix="alertd-bench-cold-") as tmp:
        profilers = (cProfile.Profile(), cProfile.Profile()) if profile else None
        gc.collect()  # the collector as `alertd serve` sets it (alertd/cli/main.py)
        gc.freeze()
        gc.set_threshold(50_000, 20, 50)
        started = time.perf_counter()
        cost, sizes, incidents = asyncio.run(cold_storm(nodes, step, Path(tmp), profilers))
        wall = time.perf_counter() - started
        if profilers:  # the processor's part (engine + router) and the store thread's, apart
            profilers[0].dump_stats(profile)
            profilers[1].dump_stats(profile + ".store")
    print(f"cold storm: {nodes:,} never-seen nodes x 8 GPU alerts, {step} webhooks per step, "
          f"{incidents:,} open incidents after, {wall:.1f} s wall")
    print("| nodes | engine | router | store | of which encoding | of which SQLite | total |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    window = min(WINDOW, nodes)
    for name, (a, b) in (("all", (0, nodes)), (f"first {window:,}", (0, window)),
                         (f"last {window:,}", (nodes - window, nodes))):
        c = cost.per_webhook(a, b)
        total = c["engine"] + c["router"] + c["store"]
        print(f"| {name} | {c['engine']:.0f} | {c['router']:.0f} | {c['store']:.0f} | {c['store'] - c['sqlite']:.0f} | "
              f"{c['sqlite']:.0f} | {total:.0f} |")
    alerts = nodes * 8
    print(f"stored bytes per alert (row payload, not pages): total {sum(sizes.values()) / alerts:.0f}; "
          + ", ".join(f"{t} {v / alerts:.0f}" for t, v in sizes.items() if v / alerts >= 1))
