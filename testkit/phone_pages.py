"""The incident pages with the most to say, for the layout tests: a hot rack (a thermal storm with its
readings, advice and trend line) and a stalled job (its suspect and nodes).

Alerts carry the labels and the expanded annotations of the shipped rules (deploy/prometheus/gpu-alerts.yml,
gpu-job-alerts.yml) as Alertmanager delivers them, with the site's node labels (``label_rack``, the job's
owner) where the rules' inputs carry them.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bench.fleetsim.rules import JOB_RULES, expand, load_alert_rules
from testkit.notify_harness import Harness, hook, wait_for
from testkit.webhooks import FIRING_END, dcgm_labels, fingerprint, iso

RULES = {r.name: r for r in load_alert_rules() + load_alert_rules(JOB_RULES)}
HOT_RACK = "r07"
HOT_NODES = 12  # 96 GPUs: a rack's worth, enough for the storm's extent to escalate it
JOB = {"namespace": "llm-pretrain", "owner_kind": "PyTorchJob", "owner_name": "llama-70b"}
JOB_NODES = 64


def shipped(name: str, labels: dict[str, str], value: float, starts: datetime) -> dict[str, Any]:
    """One firing alert of shipped rule ``name``: its labels and its annotations expanded with ``value``."""
    rule = RULES[name]
    labels = {"alertname": name, **labels, **rule.labels}
    return {"status": "firing", "labels": labels,
            "annotations": {k: expand(v, labels, value) for k, v in rule.annotations.items()},
            "startsAt": iso(starts), "endsAt": FIRING_END,
            "generatorURL": rule.generator_url, "fingerprint": fingerprint(labels)}


async def hot_rack(h: Harness, starts: datetime) -> str:
    """Every GPU of rack r07's nodes hot (86-95 °C) and throttling for heat; returns the thermal fleet's id."""
    for n in range(HOT_NODES):
        node = f"gpu-{HOT_RACK}-n{n:02d}"
        alerts = []
        for gpu in range(8):
            labels = {**dcgm_labels("prod", node, gpu, node_index=n), "label_rack": HOT_RACK}
            alerts.append(shipped("GPUTemperatureHigh", labels, 86 + (n * 8 + gpu) % 10, starts))
            alerts.append(shipped("GPUClockEventThrottling", {**labels, "clock_event_reasons": "64"}, 64, starts))
        await h.post(hook(*alerts, node=node))

    async def fleet() -> dict | None:
        rows = [r for r in await h.incidents() if r["fleet"] and len(r["nodes"]) == HOT_NODES
                and HOT_RACK in r["title"]]
        return rows[0] if rows else None

    return str((await wait_for(fleet))["id"])


async def stalled_job(h: Harness, now: datetime) -> str:
    """A 64-node job stalled, one of its nodes' InfiniBand port down a minute before; returns the job's id."""
    since = now - timedelta(minutes=4)
    nodes = [f"gpu-b-{n:04}" for n in range(1, JOB_NODES + 1)]
    port = shipped("NodeInfiniBandPortDown", {"cluster": "prod", "node": nodes[16], "device": "mlx5_2", "port": "1",
                                              "rack": "r12", **JOB}, 1, since - timedelta(minutes=1))
    await h.post(hook(port, node=nodes[16]))
    stalls = [shipped("GPUJobStalled", {"cluster": "prod", "node": node, "rack": f"r1{i // 16}", **JOB},
                      since.timestamp(), now - timedelta(seconds=30)) for i, node in enumerate(nodes)]
    await h.post(hook(*stalls, node=nodes[0]))

    async def job() -> dict | None:
        rows = [r for r in await h.incidents() if JOB["owner_name"] in r["title"] and "suspect" in r["title"]]
        return rows[0] if rows else None

    return str((await wait_for(job, timeout=20))["id"])
