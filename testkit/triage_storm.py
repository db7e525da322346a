"""What the on-call's list looks like in a storm: an Xid 119 storm over many nodes and, beside it, one GPU
falling off the bus for the third time in a week (the "replace GPU" verdict, the one critical incident).

Alerts are dcgm-exporter's (testkit.webhooks: model and driver labels), with the site's ``rack``
label; Alertmanager groups by cluster and node, so each node's alert is a webhook of its own, delivered
within seconds of each other as a storm's are.
"""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from testkit.notify_harness import Harness, hook, wait_for
from testkit.webhooks import gpu_alert

STORM_CLUSTER = "prod"
BOARD_NODE = "gpu-r01"
RACKS = 4  # storm nodes spread over racks r0..r3 by index; the model and driver vary by index too


def storm_node(i: int) -> str:
    return f"gpu-s{i:03d}"


def xid119(i: int, starts: datetime) -> dict:
    return gpu_alert(STORM_CLUSTER, storm_node(i), i % 8, 0, starts_at=starts, node_index=i,
                     extra={"xid": "119", "severity": "critical", "rack": f"r{i % RACKS}",
                            # kube-prometheus' relabelling: the exporter pod is `pod`, the GPU's workload `exported_*`
                            "pod": f"nvidia-dcgm-exporter-{i:05x}", "exported_pod": f"llm-pretrain-worker-{i}",
                            "exported_namespace": "ml-train", "exported_container": "pytorch"})


async def storm(h: Harness, nodes: int, starts: datetime, concurrency: int = 16) -> dict:
    """Post an Xid 119 on ``nodes`` nodes; returns the fleet incident once all of them are in it."""
    for first in range(0, nodes, concurrency):
        await asyncio.gather(*(h.post(hook(xid119(i, starts + timedelta(milliseconds=i)), node=storm_node(i),
                                           cluster=STORM_CLUSTER))
                               for i in range(first, min(nodes, first + concurrency))))

    async def folded() -> dict | None:
        fleets = [i for i in await h.incidents(limit="1000") if i["fleet"]]
        return fleets[0] if fleets and len(fleets[0]["children"]) == nodes else None

    return await wait_for(folded, timeout=60 + nodes / 5)


async def replace_gpu(h: Harness, now: datetime) -> str:
    """The same GPU falls off the bus three times in 7 days (the first two resolved by hand): its third
    incident carries the "replace GPU" verdict. Returns that incident's id."""
    for hours in (50, 26, 0):
        alert = gpu_alert("prod", BOARD_NODE, 3, 0, starts_at=now - timedelta(hours=hours, minutes=5),
                          extra={"xid": "79", "severity": "critical", "rack": "r9"})
        await h.post(hook(alert, node=BOARD_NODE))

        async def opened() -> dict | None:
            rows = [i for i in await h.incidents(node=BOARD_NODE) if i["status"] != "resolved"]
            return rows[0] if rows else None

        inc = await wait_for(opened)
        if hours:
            resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/resolve", params={"by": "ops"})
            assert resp.status == 200, await resp.text()

    async def judged() -> dict | None:
        doc = await h.incident(inc["id"])
        return doc if doc.get("verdict") else None

    doc = await wait_for(judged)
    assert doc["verdict"]["action"] == "replace_gpu" and doc["severity"] == "critical", doc["verdict"]
    return str(doc["id"])
