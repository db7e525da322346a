"""kill -9 under load loses nothing that was acknowledged and duplicates nothing.

A real ``alertd serve`` (SQLite, synchronous FULL) takes unique webhooks from
several concurrent connections; in the middle it is killed with SIGKILL (no
shutdown handler runs). Every request that got a 2xx is recorded with its
alerts. After a restart on the same data directory every acknowledged alert is
stored exactly once (in the inbox log, or taken by the engine) and, once the
processor has drained the log, a member of exactly one incident. Requests that
got no answer may or may not have been stored -- but never partly, and
redelivering them (as Alertmanager does) adds no member twice. Two crash cycles, the second one while
the processor is busy with the first cycle's backlog.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import aiohttp
import pytest

from testkit.alertd_proc import AlertdProcess, inbox_key_counts, member_fingerprint_counts, stored_key_counts
from testkit.webhooks import UniqueWebhooks, dedup_keys, dumps, fingerprints

CLIENTS = 6
LOAD_BEFORE_KILL = 3.0  # seconds of load before the SIGKILL
MAX_PER_CLIENT = 3000  # bounded in count as well as in time


class Ledger:
    def __init__(self) -> None:
        self.acked: list[dict[str, Any]] = []
        self.unanswered: list[dict[str, Any]] = []
        self.refused: list[tuple[int, str]] = []


async def load_until_killed(server: AlertdProcess, gen: UniqueWebhooks, ledger: Ledger) -> None:
    """Post from CLIENTS connections; SIGKILL the server after LOAD_BEFORE_KILL seconds."""
    stop = asyncio.Event()
    url = server.receiver_url

    async def client() -> None:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1)) as session:
            for _ in range(MAX_PER_CLIENT):
                if stop.is_set():
                    return
                doc = gen.next()
                try:
                    async with session.post(url, data=dumps(doc), headers={"Content-Type": "application/json"}) as resp:
                        body = await resp.read()
                        if 200 <= resp.status < 300:
                            answer = json.loads(body)
                            assert answer["alerts"] == 8, answer
                            ledger.acked.append(doc)
                        else:
                            ledger.refused.append((resp.status, body.decode(errors="replace")))
                except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
                    ledger.unanswered.append(doc)  # in flight when the server died, or refused after
                    if stop.is_set():
                        return
                    await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(client()) for _ in range(CLIENTS)]
    await asyncio.sleep(LOAD_BEFORE_KILL)
    server.kill9()  # mid-request, mid-group-commit, possibly mid-engine-step
    await asyncio.sleep(0.3)  # a few more attempts meet a dead server
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


def check_store(server: AlertdProcess, ledger: Ledger) -> None:
    keys = stored_key_counts(server.db_path)
    acked_keys = [k for doc in ledger.acked for k in dedup_keys(doc)]
    assert len(acked_keys) == len(set(acked_keys)), "the generator must not repeat itself"
    lost = [k for k in acked_keys if k not in keys]
    assert not lost, f"{len(lost)} of {len(acked_keys)} acknowledged alerts lost, e.g. {lost[:3]}"
    assert all(n == 1 for n in keys.values()), "an inbox key is stored twice"
    # A webhook is stored whole or not at all (one transaction per group commit).
    for doc in ledger.unanswered:
        present = sum(k in keys for k in dedup_keys(doc))
        assert present in (0, 8), f"webhook partly stored: {present} of 8 alerts"


async def redeliver(server: AlertdProcess, docs: list[dict[str, Any]]) -> int:
    """What Alertmanager does after a failed send (and what an HA peer does anyway); how many were stored."""
    stored = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        for doc in docs:
            async with session.post(server.receiver_url, data=dumps(doc),
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["alerts"] == 8
                stored += 1
    return stored


def duplicates_dropped(server: AlertdProcess) -> float:
    return server.metrics().get("alertd_alerts_duplicate_total", 0.0)


async def test_kill_9_under_load_loses_no_acknowledged_alert_and_duplicates_none(tmp_path):
    server = AlertdProcess(tmp_path, {"log": {"level": "warning"}, "storage": {"synchronous": "FULL"}})
    server.start()
    try:
        gen = UniqueWebhooks(run="crash", distinct_nodes=True, nodes_per_cluster=4, seed=11)
        ledgers = []
        for cycle in range(2):
            ledger = Ledger()
            started = time.monotonic()
            await load_until_killed(server, gen, ledger)
            assert not server.alive()
            assert not ledger.refused, ledger.refused[:3]
            assert len(ledger.acked) > 100, f"cycle {cycle}: only {len(ledger.acked)} webhooks acknowledged"
            assert time.monotonic() - started < 60

            server.start()  # same data dir: the store recovers from its WAL
            check_store(server, ledger)
            ledgers.append(ledger)
            # Cycle 0 goes straight on: the second kill lands while the processor replays the backlog.

        for ledger in ledgers:  # the first cycle's acknowledgements survived the second crash too
            check_store(server, ledger)
        server.wait_drained(120)
        acked = [doc for ledger in ledgers for doc in ledger.acked]
        unanswered = [doc for ledger in ledgers for doc in ledger.unanswered]
        with server.db() as conn:
            members = member_fingerprint_counts(conn)
            processed = conn.execute("SELECT count(*) FROM inbox WHERE processed = 1").fetchone()[0]
        assert processed >= 8 * len(acked)
        wanted = [fp for doc in acked for fp in fingerprints(doc)]
        missing = [fp for fp in wanted if fp not in members]
        assert not missing, f"{len(missing)} acknowledged alerts are in no incident, e.g. {missing[:3]}"
        twice = [fp for fp, n in members.items() if n != 1]
        assert not twice, f"{len(twice)} alerts are members of more than one incident, e.g. {twice[:3]}"

        # Alertmanager retries what got no answer; acknowledged ones come again from the HA peer.
        assert await redeliver(server, unanswered) == len(unanswered)
        server.wait_drained(60)
        before = duplicates_dropped(server)
        sample = min(50, len(acked))
        assert await redeliver(server, random.Random(3).sample(acked, sample)) == sample
        server.wait_drained(60)
        assert duplicates_dropped(server) - before == 8 * sample  # every alert of the copies dropped
        with server.db() as conn:
            keys = inbox_key_counts(conn)
            members = member_fingerprint_counts(conn)
        assert all(n == 1 for n in keys.values())
        for doc in acked + unanswered:
            assert all(members[fp] == 1 for fp in fingerprints(doc)), doc["alerts"][0]["labels"]["node"]

        # And the read API agrees for a sample of nodes.
        for doc in random.Random(5).sample(acked, 20):
            node = doc["alerts"][0]["labels"]["node"]
            status, listing = server.get_json(f"/api/v1/incidents?node={node}")
            assert status == 200 and len(listing["incidents"]) == 1, listing
            status, incident = server.get_json(f"/api/v1/incidents/{listing['incidents'][0]['id']}")
            assert sorted(m["fingerprint"] for m in incident["members"]) == sorted(fingerprints(doc))
        print(f"\ncrash cycles: acknowledged {len(acked)} webhooks ({8 * len(acked)} alerts), "
              f"{len(unanswered)} unanswered and redelivered")
    finally:
        server.stop()


@pytest.mark.parametrize("when", ["after_commit_before_processing", "idle"])
async def test_restart_after_kill_9_replays_unprocessed_inbox_rows(tmp_path, when):
    """Rows stored but not yet through the engine when the process died are processed after restart."""
    server = AlertdProcess(tmp_path, {"log": {"level": "warning"}, "processing": {"batch_size": 50}})
    server.start()
    try:
        gen = UniqueWebhooks(run=f"replay-{when}", distinct_nodes=True, nodes_per_cluster=4)
        docs = [gen.next() for _ in range(200)]
        async with aiohttp.ClientSession() as session:
            async def send(doc):
                async with session.post(server.receiver_url, data=dumps(doc)) as resp:
                    assert resp.status == 200
            await asyncio.gather(*(send(d) for d in docs))
        if when == "idle":
            server.wait_drained(60)
        server.kill9()
        server.start()
        server.wait_drained(60)
        with server.db() as conn:
            members = member_fingerprint_counts(conn)
            keys = inbox_key_counts(conn)
        assert all(keys[k] == 1 for d in docs for k in dedup_keys(d))
        assert all(members[fp] == 1 for d in docs for fp in fingerprints(d))
        status, listing = server.get_json(f"/api/v1/incidents?node={docs[-1]['alerts'][0]['labels']['node']}")
        assert status == 200 and listing["incidents"][0]["memberCount"] == 8, listing
    finally:
        server.stop()
