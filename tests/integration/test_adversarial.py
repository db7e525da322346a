"""The adversarial corpus (tests/fixtures/adversarial/, written by make_corpus.py) against a real ``alertd serve``:
ReDoS-shaped annotations, expensive PromQL, deep and wide JSON, huge numbers, odd Unicode, forged Slack actions,
cross-origin requests. Each request must answer 4xx, or be taken (stored, then an incident or set aside) within
the engine's budget, while a steady stream of good webhooks becomes incidents on time, /readyz never fails and
no response is a 5xx.
"""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from alertd.app.budget import CPU_PER_ALERT
from testkit.alertd_proc import AlertdProcess, parse_metrics
from testkit.process import http
from testkit.webhooks import UniqueWebhooks

CORPUS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial"
CORPUS = {p.stem: json.loads(p.read_text()) for p in sorted(CORPUS_DIR.glob("*.json"))}
SLACK_SECRET = "adversarial-signing-secret"
TIMEOUT = aiohttp.ClientTimeout(total=60)
def cases() -> list[Any]:
    return [pytest.param(name, id=name) for name in CORPUS]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> AlertdProcess:
    proc = AlertdProcess(tmp_path_factory.mktemp("adversarial"), {
        "log": {"level": "warning"}, "notify": {"slack": {"signing_secret": SLACK_SECRET}}})
    proc.start()
    example = (Path(__file__).resolve().parents[2] / "examples" / "webhook-gpu-node.json").read_bytes()
    status, _, _ = http("POST", proc.receiver_url, example, {"Content-Type": "application/json"})
    assert status == 200
    deadline = time.monotonic() + 30
    while http("GET", proc.url + "/api/v1/incidents/INC-1")[0] != 200:  # what the cross-origin cases aim at
        assert time.monotonic() < deadline, "the example webhook made no incident"
        time.sleep(0.1)
    yield proc
    proc.stop()


async def send(session: aiohttp.ClientSession, server: AlertdProcess, case: dict[str, Any]) -> int:
    async with session.request(case["method"], server.url + case["path"], data=case["body"].encode(),
                               headers=case["headers"]) as resp:  # a Host header given here is sent as is
        await resp.read()
        return resp.status


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        assert resp.status == 200, (url, resp.status)
        return await resp.json()


def nodes_of(case: dict[str, Any]) -> set[str]:
    """The nodes a taken case's alerts name (each case uses nodes of its own)."""
    return {a["labels"].get("node", "") for a in json.loads(case["body"]).get("alerts", [])}


async def accounted(session: aiohttp.ClientSession, server: AlertdProcess, case: dict[str, Any]) -> bool:
    """Every alert of the case is a member of an incident, or set aside (quarantine)."""
    fingerprints = {a["fingerprint"] for a in json.loads(case["body"])["alerts"]}
    quarantined = await get_json(session, server.url + "/api/v1/quarantine?limit=1000")
    text = " ".join(i["body"] for i in quarantined["items"])
    seen = {fp for fp in fingerprints if fp in text}
    for node in nodes_of(case):
        found = await get_json(session, server.url + "/api/v1/incidents?limit=1000&node=" + node)
        for inc in found["incidents"]:
            detail = await get_json(session, server.url + f"/api/v1/incidents/{inc['id']}")
            seen |= {m["fingerprint"] for m in detail["members"]}
    return fingerprints <= seen


@pytest.mark.parametrize("name", cases())
async def test_each_case_is_refused_or_taken_within_budget(server, name):
    case = CORPUS[name]
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        status = await send(session, server, case)
        assert status < 500, f"{name}: {status}"
        if case["expect"] == "4xx":
            assert 400 <= status < 500, f"{name}: answered {status}, expected a refusal"
            return
        assert status == 200, f"{name}: {status}"
        deadline = time.monotonic() + 30
        while not await accounted(session, server, case):
            assert time.monotonic() < deadline, f"{name}: its alerts are neither incidents nor set aside"
            await asyncio.sleep(0.2)
        async with session.get(server.url + "/readyz") as resp:
            assert resp.status == 200
        async with session.get(server.url + "/metrics") as resp:
            metrics = parse_metrics(await resp.text())
        assert metrics["alertd_classify_seconds_max"] <= CPU_PER_ALERT, metrics["alertd_classify_seconds_max"]


async def test_good_webhooks_flow_on_time_beside_the_whole_corpus(server):
    """The corpus sent three times over while good webhooks arrive every 20 ms (bounded: 400 of them); every
    good one becomes an incident, the engine took 99 % of the webhooks within 2.5 s of their receipt and every
    one within 10 s, /readyz stayed 200 throughout and nothing answered 5xx."""
    gen = UniqueWebhooks(run="adv", distinct_nodes=True, nodes_per_cluster=4)
    statuses: list[tuple[str, int]] = []
    unready: list[int] = []
    good: list[dict[str, Any]] = []
    done = asyncio.Event()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async def good_stream() -> None:
            for _ in range(400):
                doc = gen.next()
                async with session.post(server.receiver_url, json=doc) as resp:
                    assert resp.status == 200, resp.status
                good.append(doc)
                await asyncio.sleep(0.02)

        async def corpus() -> None:
            for _ in range(3):
                for name, case in CORPUS.items():
                    statuses.append((name, await send(session, server, case)))

        async def ready_poll() -> None:
            while not done.is_set():
                async with session.get(server.url + "/readyz") as resp:
                    if resp.status != 200:
                        unready.append(resp.status)
                await asyncio.sleep(0.1)

        poller = asyncio.create_task(ready_poll())
        await asyncio.gather(good_stream(), corpus())
        nodes = {a["labels"]["node"] for doc in good for a in doc["alerts"]}
        deadline = time.monotonic() + 60
        while True:
            found = await get_json(session, server.url + "/api/v1/incidents?limit=1000&status=open")
            missing = nodes - {i["node"] for i in found["incidents"]}
            if not missing or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        done.set()
        await poller
        async with session.get(server.url + "/metrics") as resp:
            metrics = parse_metrics(await resp.text())
    assert not missing, f"{len(missing)} good webhooks' nodes have no incident"
    assert [(n, s) for n, s in statuses if s >= 500] == []
    assert unready == []
    # A case that stalls the engine holds every good webhook behind it: a 2.6 s stall already puts more than 1 %
    # of them past 2.5 s. One or two late on a loaded two-core machine is the machine, and still under 10 s.
    count = metrics["alertd_processing_latency_seconds_count"]
    late = count - metrics['alertd_processing_latency_seconds_bucket{le="2.5"}']
    assert late <= count // 100, f"{late} of {count} webhooks waited over 2.5 s for the engine"
    assert metrics['alertd_processing_latency_seconds_bucket{le="10.0"}'] == count, "a webhook waited over 10 s"
