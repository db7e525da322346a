"""Time from a remediation's approval to the node cordoned and to it drained, on a real kube-apiserver.

    python -m bench.remediation_latency                    # 10 rounds, 8 GPU pods per node
    python -m bench.remediation_latency --rounds 20 --pods 16

Starts etcd, kube-apiserver and kube-controller-manager (testkit/kube_apiserver.py, built by
scripts/install-test-deps.sh) and alertd in-process on SQLite, acting as the static-token user bound to the
shipped RBAC (deploy/kubernetes/rbac.yaml). Each round: an Xid 79 webhook for a fresh node holding ``--pods``
GPU pods, the proposal it makes, an approval through the API (its time is the approval's ``at``), then the
cordon's and the drain's finishing times from the remediation's results (same clock). Printed: median and
worst of approval -> cordoned and approval -> drained, in milliseconds. A benchmark: it prints figures and
asserts nothing. Bounded: ``--rounds`` rounds, 30 s each at most.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from datetime import datetime
from pathlib import Path


from alertd.config.settings import parse_config  # noqa: E402
from testkit import kube_gpu_cluster as kc  # noqa: E402
from testkit.kube_apiserver import start_kube_apiserver  # noqa: E402
from testkit.notify_harness import Harness, hook, wait_for, xid_alert  # noqa: E402



def ms(a: str, b: str) -> float:
    return (datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.fromisoformat(a.replace("Z", "+00:00"))
            ).total_seconds() * 1000


async def one_round(h: Harness, k, node: str, pods: int) -> tuple[float, float]:
    kc.add_node(k, node)
    for i in range(pods):
        kc.add_pod(k, "bench", f"{node}-w{i}", node, gpus=1, labels={"batch.kubernetes.io/job-name": node})
    # a cluster label per round: five nodes failing within 15 minutes in one cluster would make a fleet incident
    await h.post(hook(xid_alert(node, 0, cluster=node), node=node, cluster=node))
    inc = await wait_for(lambda: _incident(h, node), 20)

    async def state(*states: str) -> dict | None:
        resp = await h.client.get(f"/api/v1/incidents/{inc['id']}/remediations")
        return next((r for r in (await resp.json())["remediations"] if r["state"] in states), None)

    await wait_for(lambda: state("proposed"), 20)
    resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve")
    assert resp.status == 200, await resp.text()
    done = await wait_for(lambda: state("done", "failed"), 30)
    approved = done["approvals"][-1]["at"]
    cordon = next(r for r in done["results"] if r["step"] == "cordon")["at"]
    drained = next(r for r in done["results"] if r["step"] == "drain")["at"]
    return ms(approved, cordon), ms(approved, drained)


async def _incident(h: Harness, node: str) -> dict | None:
    return next((i for i in await h.incidents() if i.get("node") == node), None)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        k = start_kube_apiserver(work / "kube")
        try:
            kc.apply_shipped_rbac(k)
            kc.namespace(k, "bench")
            (work / "alertd").mkdir()
            h = Harness(work / "alertd")
            (work / "alertd" / "rules" / "remediation.yml").write_text(kc.policy(share=1.0, per_hour=1000, timeout="30s"))
            cfg_doc = {**h.cfg.raw, "enrich": {"kube": {"kubeconfig": str(k.kubeconfig(work / "kc", kc.USER))}}}
            h.cfg = parse_config(cfg_doc, "bench")
            await h.start()
            try:
                cordon, drained = [], []
                for r in range(args.rounds):
                    c, d = await asyncio.wait_for(one_round(h, k, f"bench-{r}", args.pods), 30)
                    cordon.append(c)
                    drained.append(d)
            finally:
                await h.stop()
        finally:
            k.stop()
    print(f"rounds {args.rounds}, {args.pods} GPU pods per node, drain-gpu through the Eviction API")
    print(f"approval -> cordoned: median {statistics.median(cordon):.0f} ms, worst {max(cordon):.0f} ms")
    print(f"approval -> drained:  median {statistics.median(drained):.0f} ms, worst {max(drained):.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pods", type=int, default=8)
    asyncio.run(main(parser.parse_args()))
