"""bench/fleetsim: an alert Alertmanager never sends still pages, through alertd's reconciliation.

The case of the simulated month: an Xid 95 fires 87 ms after its group's flush and resolves just before the
next one, with nothing else of the group firing. The emulated DedupStage sends nothing for it (notify.go:
"no need to notify the receiver since it doesn't know about them"); alertd's reconciliation, asking the
emulated API at its poll interval, takes it in, and it pages like any other alert.
"""
from __future__ import annotations

import random
from datetime import timedelta

from alertd.authoring.replay import Recording, as_json, replay
from alertd.authoring.virtual import build_router
from alertd.core.model import HELD_BY, RECONCILED_BY
from alertd.rules.ruleset import load_rules
from alertd.rules.shipped import SHIPPED_RULES

from bench.fleetsim.alertmanager import Dispatcher, RouteConfig
from bench.fleetsim.labelset import fingerprint
from bench.fleetsim.prometheus import SEND_LATENCY, Instance
from bench.fleetsim.reconcile import first_poll, reconcile_webhooks
from bench.fleetsim.rules import expand, load_alert_rules
from bench.fleetsim.run import unmuted
from bench.fleetsim.sim import START

ROUTE = RouteConfig("alertname", ("alertname", "cluster"), dup_probability=0.0)
XID_RULE = next(r for r in load_alert_rules() if r.name == "GPUXidError")


def xid(node: str, gpu: int, code: int, starts: float, resolved: float, problem: str) -> Instance:
    """A GPUXidError as the shipped rule labels it on the simulated fleet (bench/fleetsim/predicates.py)."""
    labels = {"alertname": "GPUXidError", "cluster": "h100-a", "node": node, "gpu": str(gpu),
              "UUID": f"GPU-{node}-{gpu}", "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0", "device": f"nvidia{gpu}",
              "modelName": "NVIDIA H100 80GB HBM3", "Hostname": f"dcgm-exporter-{node[-3:]}",
              "DCGM_FI_DRIVER_VERSION": "550.90.07", "job": "dcgm-exporter", "instance": "10.0.0.1:9400",
              "xid": str(code), **XID_RULE.labels}
    annotations = {k: expand(v, labels, float(code)) for k, v in XID_RULE.annotations.items()}
    return Instance(XID_RULE, labels, fingerprint(labels), annotations, starts, starts, resolved, problem,
                    retained_until=resolved + 900)


def puts(*instances: Instance) -> list[tuple[float, Instance, bool]]:
    out = []
    for i in instances:
        out.append((i.starts_at + SEND_LATENCY, i, False))
        assert i.resolved_at is not None
        out.append((i.resolved_at + SEND_LATENCY, i, True))
    return sorted(out, key=lambda p: p[0])


def test_fired_and_resolved_between_flushes_is_never_sent_yet_pages_through_reconciliation():
    earlier = xid("h100-a-r001-n01", 0, 63, 100.0, 200.0, "P1-row-remap")  # its group flushes at 130, 430, 730
    lost = xid("h100-a-r002-n05", 3, 95, 430.087, 729.0, "P2-gpu_hbm3")  # 87 ms after a flush, gone before the next
    flushes = Dispatcher(ROUTE, START, random.Random(1)).run(puts(earlier, lost), 5000.0)
    assert [round(f.at, 3) for f in flushes] == [130.004, 430.004]
    assert all(a["fingerprint"] != lost.fingerprint for f in flushes for a in f.body["alerts"])  # the DedupStage

    polls = reconcile_webhooks([earlier, lost], flushes, ROUTE, START, 5000.0, interval=180.0, offset=0.0)
    assert first_poll(lost, 180.0, 0.0, 60.0) == 540.0  # the first poll that finds it a minute old
    assert [(at, body["receiver"], [(a["fingerprint"], a["status"]) for a in body["alerts"]]) for at, body in polls] == [
        (180.0, HELD_BY, [(earlier.fingerprint, "firing")]),
        # Alertmanager no longer lists it; its resolve would wait for the flush at 430
        (360.0, RECONCILED_BY, [(earlier.fingerprint, "resolved")]),
        (540.0, HELD_BY, [(lost.fingerprint, "firing")]),
        (900.0, RECONCILED_BY, [(lost.fingerprint, "resolved")])]  # no flush ever sends this resolve

    webhooks = sorted([(START + timedelta(seconds=f.at + 0.01), f.body) for f in flushes]
                      + [(START + timedelta(seconds=at), body) for at, body in polls], key=lambda w: w[0])
    rules = unmuted(load_rules([str(SHIPPED_RULES)]))  # as the simulation replays: paging at every hour
    report = as_json(replay(Recording(webhooks=webhooks), rules, router=build_router(rules)))
    # the first Xid came by webhook before the poll listed it; its resolve by webhook came after reconciliation's
    assert report["summary"]["duplicates"] == 2
    [incident] = [i for i in report["incidents"] if i["node"] == "h100-a-r002-n05"]
    assert incident["xids"] == [95] and [(m["viaApi"], m["status"]) for m in incident["members"]] == [(True, "resolved")]
    assert incident["status"] == "resolved"
    pages = [n for n in report["notifications"] if n["incident"] == incident["id"] and n["sent"]
             and n["kind"] == "page" and n["target"].startswith("pagerduty")]
    assert len(pages) == 1


def test_an_alert_gone_before_any_poll_finds_it_old_enough_is_not_taken():
    short = xid("h100-a-r003-n02", 1, 95, 10.0, 65.0, "P3")
    assert first_poll(short, 180.0, 0.0, 60.0) is None
    assert reconcile_webhooks([short], [], ROUTE, START, 5000.0, interval=180.0, offset=0.0) == []
