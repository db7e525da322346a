"""Block Kit rendering: content, buttons, and Slack's limits under extreme incidents."""
from __future__ import annotations

from datetime import timedelta

from alertd.core.model import iso
from alertd.integrations.presentation import runbook_url
from alertd.integrations.slack import render as R
from testkit.slack_blocks import validate_blocks
from testkit.builders import alert, at, engine, xid

CTX = R.RenderContext(runbook_base_url="https://git.example/runbooks/", alertmanager_url="http://am.example:9093",
                      alertd_url="https://alertd.example", now=at(120))


def xid79():
    eng = engine()
    a = xid(79, node="gpu-node-7", gpu="3")
    a.generator_url = "http://prometheus.example:9090/graph?g0.expr=x"
    inc = eng.ingest([a], at(0))[0].incident
    return eng, inc


def texts(blocks) -> str:
    out = []
    for b in blocks:
        if "text" in b and isinstance(b["text"], dict):
            out.append(b["text"]["text"])
        for f in b.get("fields", []):
            out.append(f["text"])
        for e in b.get("elements", []):
            out.append(e.get("text", "") if isinstance(e.get("text"), str) else e.get("text", {}).get("text", ""))
    return "\n".join(out)


def buttons(blocks) -> dict[str, str]:
    return {e["action_id"]: e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def test_xid79_message_shows_what_on_call_needs():
    _, inc = xid79()
    text, blocks = R.render_incident(inc, CTX)
    assert validate_blocks(blocks) == []
    assert text == f"[CRITICAL] {inc.title} ({inc.id})"
    assert blocks[0]["type"] == "header" and "GPU has fallen off the bus" in blocks[0]["text"]["text"]
    body = texts(blocks)
    for expected in ("gpu-node-7", "GPU 3", "Xid*\n79", "Drain and reboot the node", "fallen off the bus",
                     "<https://git.example/runbooks/xid-hardware.md|Runbook>",
                     "<http://prometheus.example:9090/graph?g0.expr=x|Prometheus>",
                     "http://am.example:9093/#/alerts?filter=%7Bnode%3D%22gpu-node-7%22%7D",
                     "https://alertd.example/ui/incidents/" + inc.id, "1 firing, 0 resolved"):
        assert expected in body, expected
    assert buttons(blocks) == {"alertd_ack": inc.id, "alertd_resolve": inc.id, "alertd_silence_1h": inc.id,
                               "alertd_silence_4h": inc.id, "alertd_silence_24h": inc.id}


def test_buttons_follow_the_state():
    eng, inc = xid79()
    inc.annotations["silence"] = {"id": "abc", "endsAt": iso(at(3600)), "createdBy": "ana (slack:U1)"}
    _, blocks = R.render_incident(inc, CTX)
    assert set(buttons(blocks)) == {"alertd_ack", "alertd_resolve", "alertd_unsilence"}
    assert "Silenced until 2026-11-30 13:00 UTC by ana (slack:U1)" in texts(blocks)
    inc.annotations["silence"]["endsAt"] = iso(at(60))  # expired before CTX.now
    _, blocks = R.render_incident(inc, CTX)
    assert "alertd_silence_4h" in buttons(blocks) and "Silence expired" in texts(blocks)
    eng.correlator.acknowledge(inc.id, "ana", at(100))
    _, blocks = R.render_incident(inc, CTX)
    assert "alertd_ack" not in buttons(blocks) and "Acknowledged by ana" in texts(blocks)
    eng.correlator.resolve(inc.id, "bo", at(200))
    text, blocks = R.render_incident(inc, CTX)
    assert buttons(blocks) == {} and text.startswith("[RESOLVED]") and "Open for*\n3m20s" in texts(blocks)


def test_enrichment_annotations_are_rendered_when_present():
    _, inc = xid79()
    inc.annotations.update(
        owners=[{"kind": "PyTorchJob", "name": "llm", "namespace": "train", "team": "ml-platform",
                 "channel": "#ml-alerts", "pods": 2, "gpus": 16}],
        pods=[{"namespace": "train", "name": "llm-0", "node": "gpu-node-7", "phase": "Running", "gpus": 8,
               "owner_chain": [{"kind": "PyTorchJob", "name": "llm"}], "team": "ml-platform"}],
        log_evidence=[{"time": "2026-11-30T11:59:58.000Z", "host": "gpu-node-7", "node": "gpu-node-7", "xid": 79,
                       "line": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}],
        logs_unavailable="opensearch timed out",
    )
    _, blocks = R.render_incident(inc, CTX)
    assert validate_blocks(blocks) == []
    body = texts(blocks)
    assert "PyTorchJob train/llm · team ml-platform · #ml-alerts · 2 pods, 16 GPUs" in body
    assert "train/llm-0 · Running · 8 GPUs · team ml-platform" in body
    assert "NVRM: Xid (PCI:0000:3b:00): 79, pid='&lt;unknown&gt;'" in body  # escaped for mrkdwn
    assert "Kernel logs unavailable: opensearch timed out" in body


def test_runbook_links():
    assert runbook_url("xid-hardware", "https://x/runbooks") == "https://x/runbooks/xid-hardware.md"
    assert runbook_url("https://wiki/page", "https://x/") == "https://wiki/page"
    assert runbook_url("", "https://x/") == ""


def test_huge_incident_stays_within_block_kit_limits():
    eng = engine()
    alerts = [xid(79, node="gpu-node-7", gpu=str(g)) for g in range(8)]
    alerts += [alert("GPUXidError", node="gpu-node-7", gpu=str(g % 8), xid="45", UUID=f"GPU-x-{g}",
                     annotations={"summary": "x" * 400}, instance=f"i{g}") for g in range(600)]
    inc = eng.ingest(alerts, at(0))[0].incident
    assert len(inc.members) == 608
    inc.primary = inc.primary.__class__(**{**inc.primary.to_dict(), "meaning": "m" * 5000, "investigate": "i" * 5000})
    inc.title = "T" * 400
    inc.annotations["log_evidence"] = [f"line {i} " + "y" * 200 for i in range(500)]
    inc.annotations["pods"] = [f"ns/pod-{i}" for i in range(1000)]
    inc.annotations["owners"] = ["team"] * 100
    inc.gpus = inc.gpus * 20
    text, blocks = R.render_incident(inc, CTX)
    assert validate_blocks(blocks) == [], validate_blocks(blocks)
    assert len(blocks) <= R.MAX_BLOCKS
    assert len(blocks[0]["text"]["text"]) <= 150
    body = texts(blocks)
    assert "more" in body and "…and" in body
    assert blocks[-1]["type"] == "actions"  # buttons always survive truncation
    assert len(text) <= R.MAX_FALLBACK


def test_fleet_incident_lists_nodes_within_limits():
    eng = engine()
    changes = eng.ingest([xid(79, node=f"gpu-node-{i:04d}", starts=i) for i in range(6)], at(10))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    fleet.nodes = [f"gpu-node-{i:05d}" for i in range(3000)]
    _, blocks = R.render_incident(fleet, CTX)
    assert validate_blocks(blocks) == []
    body = texts(blocks)
    assert "*Nodes (3000)*" in body and "…and" in body


def test_many_blocks_are_cut_with_a_count():
    _, inc = xid79()
    # pack_lines keeps every chunk under the limit and counts what did not fit
    chunks = R.pack_lines([f"line {i}" + "z" * 100 for i in range(1000)], 3000, 4)
    assert len(chunks) == 4 and all(len(c) <= 3000 for c in chunks)
    assert chunks[-1].endswith("more") and "…and" in chunks[-1]
    shown = sum(c.count("\n") + 1 for c in chunks) - 1
    assert chunks[-1].rsplit("…and ", 1)[1] == f"{1000 - shown} more"


def test_thread_reply_coalesces_and_summarises_resolution():
    eng, inc = xid79()
    events = [{"at": iso(at(i)), "kind": "alert_joined", "text": f"GPUXidError: Xid 45 (GPU {i})"} for i in range(40)]
    text, blocks = R.render_thread(events, inc)
    assert validate_blocks(blocks) == []
    assert "…and 10 more" in texts(blocks) and text.startswith(":heavy_plus_sign:")
    eng.correlator.acknowledge(inc.id, "ana", at(30))
    changes = eng.correlator.resolve(inc.id, "bo", at(90))
    _, blocks = R.render_thread([e.to_dict() for e in changes[0].events], inc)
    body = texts(blocks)
    assert "resolved by bo; open for 1m30s" in body
    assert "*Summary:* open for 1m30s; 1 alert (xid; Xid 79); acknowledged by ana." in body


def test_plain_text_picture():
    _, inc = xid79()
    _, blocks = R.render_incident(inc, CTX)
    picture = R.to_text(blocks)
    assert picture.startswith("== CRITICAL: Xid 79") and "[Acknowledge] [Resolve] [Silence 1h]" in picture
    assert timedelta(0) == timedelta(0)
