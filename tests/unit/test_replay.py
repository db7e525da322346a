"""alertd replay, the recording format, and the recorder behind serve --record."""
from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from alertd.app.lifecycle import cleanup_ctx
from alertd.authoring.record import Recorder
from alertd.authoring.replay import main, read_recording, replay
from alertd.authoring.virtual import load_rule_set
from alertd.cli.main import main as cli_main
from alertd.config.settings import Config
from alertd.notify.router import ConsoleRouter

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"
EXAMPLE = ROOT / "examples" / "recorded.jsonl"
WEBHOOK = json.loads((ROOT / "examples" / "webhook-gpu-node.json").read_text())
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)


def run_main(*args: str, **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    opts = dict(rule_paths=[str(RULES)], config=None, as_json_output=False, tail=None, until=None)
    opts.update(kw)
    code = main(*args, out=out, err=err, **opts)
    return code, out.getvalue(), err.getvalue()


def test_example_recording_replays_to_one_node_incident_and_one_pod_incident():
    rec = read_recording(EXAMPLE)
    assert not rec.problems and len(rec.webhooks) == 28
    res = replay(rec, load_rule_set([RULES]))
    run = res.run
    assert run.duplicates == 1  # the HA peer's copy of the Xid 79 notification
    node, pod = run.incidents["INC-1"], run.incidents["INC-2"]
    assert node.key == "node|cluster=prod-a|node=gpu-node-17"
    assert sorted(m.alertname for m in node.members.values()) == ["DCGMExporterDown", "GPUXidError", "KubeNodeCordoned"]
    assert node.severity == "critical" and node.xids == [79] and node.primary.action == "reboot_node"
    assert pod.key == "application-xid|cluster=prod-a|namespace=nlp|pod=bert-finetune-7"
    # everything resolved in the recording, so after the hold-down both are resolved
    assert node.status == pod.status == "resolved"
    assert node.resolved_at - datetime(2026, 11, 30, 10, 33, 15, 9000, tzinfo=timezone.utc) < timedelta(minutes=5, seconds=2)
    # no heartbeat gap in the recording: no pipeline incident
    assert len(run.incidents) == 2


def test_replay_routes_with_the_shipped_routing():
    res = replay(read_recording(EXAMPLE), load_rule_set([RULES]))
    sent = {(s.item.incident_id, s.item.target.split("|")[0]) for s, fate in res.run.outcomes() if not fate}
    assert ("INC-1", "pagerduty:gpu-infra") in sent and ("INC-1", "slack:#gpu-oncall") in sent
    assert ("INC-2", "slack:#gpu-alerts") in sent  # application Xid: the owners' default, never the pager
    assert not any(inc == "INC-2" and target.startswith("pagerduty") for inc, target in sent)
    # nobody acknowledged INC-1 within 15 minutes: the escalation would fire
    assert ("INC-1", "pagerduty:gpu-infra-escalation") in sent


def test_text_output(tmp_path):
    code, out, err = run_main(str(EXAMPLE))
    assert code == 0, err
    assert out.startswith("replayed 28 webhooks (28 alerts, 1 redelivered) from 2026-11-30 10:14:30 to ")
    assert "INC-1  resolved     critical Xid 79: GPU has fallen off the bus on gpu-node-17 GPU 3" in out
    assert "key node|cluster=prod-a|node=gpu-node-17  group node  signals metrics_missing,node_cordoned,xid" in out
    assert "pagerduty:gpu-infra" in out and "notifications (" in out


def test_json_output_is_machine_readable():
    code, out, _ = run_main(str(EXAMPLE), as_json_output=True)
    assert code == 0
    data = json.loads(out)
    assert data["summary"]["incidents"] == 2 and data["summary"]["duplicates"] == 1
    assert [i["id"] for i in data["incidents"]] == ["INC-1", "INC-2"]
    assert data["incidents"][0]["members"] and data["incidents"][0]["timeline"]
    first = data["notifications"][0]
    assert set(first) >= {"at", "due", "incident", "target", "kind", "change", "sent", "skipped", "payload"}


def test_without_routing_notifications_go_to_the_console(tmp_path):
    rules = [RULES / "xid-catalog.yml", RULES / "signals.yml", RULES / "correlation.yml"]
    code, out, _ = run_main(str(EXAMPLE), rule_paths=[str(p) for p in rules], as_json_output=True)
    assert code == 0
    targets = {n["target"] for n in json.loads(out)["notifications"]}
    assert targets == {"console"}


def test_tail_and_until_control_the_clock():
    rules = load_rule_set([RULES])
    res = replay(read_recording(EXAMPLE), rules, tail=timedelta(0))
    assert res.run.incidents["INC-1"].status == "open"  # hold-down still running at the last webhook
    until = datetime(2026, 11, 30, 10, 16, tzinfo=timezone.utc)
    res = replay(read_recording(EXAMPLE), rules, until=until)
    assert list(res.run.incidents) == ["INC-1"] and res.end == until


def test_bad_lines_and_bad_webhooks_are_reported_not_fatal(tmp_path):
    f = tmp_path / "rec.jsonl"
    good = {"received_at": "2026-11-30T10:18:00Z", "body": WEBHOOK}
    f.write_text("\n".join([
        "not json",
        json.dumps({"received_at": "2026-11-30T10:17:00Z"}),
        json.dumps({"received_at": "2026-11-30T10:17:30Z", "body": {"alerts": "nope"}}),
        json.dumps(good),
        "",
    ]))
    code, out, err = run_main(str(f))
    assert code == 0
    assert f"{f}:1:1: not a recorded webhook" in err and f"{f}:2:1: not a recorded webhook" in err
    assert "would be rejected with 400" in out
    assert "replayed 1 webhook (3 alerts" in out


def test_missing_file_and_bad_options(tmp_path, capsys):
    assert run_main(str(tmp_path / "none.jsonl"))[0] == 1
    assert run_main(str(EXAMPLE), tail="soon")[0] == 2
    assert cli_main(["replay", str(EXAMPLE), "--rules", str(tmp_path / "no-rules")]) == 1
    assert "invalid rules:" in capsys.readouterr().err


def test_recorder_writes_one_line_per_webhook(tmp_path):
    path = tmp_path / "sub" / "rec.jsonl"
    rec = Recorder(path)
    compact = json.dumps(WEBHOOK, separators=(",", ":")).encode() + b"\n"
    pretty = json.dumps(WEBHOOK, indent=2)
    rec.write(T0, compact)
    rec.write(T0 + timedelta(seconds=1.5), pretty)
    rec.close()
    rec.write(T0, compact)  # after close: ignored, not an error
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == {"received_at": "2026-11-30T10:00:00.000000Z", "body": WEBHOOK}
    assert json.loads(lines[1])["received_at"] == "2026-11-30T10:00:01.500000Z"
    got = read_recording(path)
    assert [b for _, b in got.webhooks] == [WEBHOOK, WEBHOOK]
    # appending, never truncating
    again = Recorder(path)
    again.write(T0, compact)
    again.close()
    assert len(path.read_text().splitlines()) == 3


def test_recorder_flushes_at_most_once_a_second(tmp_path):
    path = tmp_path / "rec.jsonl"
    rec = Recorder(path, flush_seconds=3600)
    rec.write(T0, b"{}")
    assert path.read_text() == ""  # buffered: the request path did not touch the disk
    rec.flush()
    assert path.read_text().count("\n") == 1
    rec.close()


async def test_the_webhook_handler_records_accepted_webhooks_only(tmp_path):
    from alertd.rules.ruleset import load_rules
    from alertd.app.service import Service
    from alertd.store import open_store
    from testkit.served import served

    cfg = Config(data_dir=tmp_path)
    store = open_store("sqlite", data_dir=tmp_path)
    recording = tmp_path / "rec.jsonl"
    recorder = Recorder(recording)
    svc = Service(cfg, store, load_rules([RULES]), router=ConsoleRouter(enabled=False), recorder=recorder)
    app = served(svc)
    app.cleanup_ctx.append(cleanup_ctx(recorder))
    async with TestClient(TestServer(app)) as client:
        resp = await client.post("/api/v1/alerts/alertmanager", json=WEBHOOK)
        assert resp.status == 200, await resp.text()
        resp = await client.post("/api/v1/alerts/alertmanager", json={"alerts": "nope"})
        assert resp.status == 400
    lines = recording.read_text().splitlines()  # closed (flushed) on shutdown
    assert len(lines) == 1
    assert json.loads(lines[0])["body"] == WEBHOOK
    rec = read_recording(recording)
    res = replay(rec, load_rule_set([RULES]))
    assert [i.key for i in res.run.incidents.values()] == ["node|cluster=prod-a|node=gpu-node-17"]


def _webhook(at: datetime, status: str, starts: datetime, ends: datetime | None) -> tuple[datetime, dict]:
    alert = {"status": status, "labels": {"alertname": "GPUXidError", "cluster": "prod-a", "node": "n1",
                                          "xid": "79", "gpu": "0", "severity": "critical"},
             "annotations": {}, "startsAt": starts.isoformat(), "fingerprint": "f1",
             "endsAt": (ends or datetime(1, 1, 1, tzinfo=timezone.utc)).isoformat(),
             "generatorURL": ""}
    body = {"version": "4", "status": status, "receiver": "alertd", "groupKey": "{}:{alertname=\"GPUXidError\"}",
            "groupLabels": {"alertname": "GPUXidError"}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://am", "truncatedAlerts": 0, "alerts": [alert]}
    return at, body


def test_a_flapping_gpu_is_one_incident_one_post_and_one_page():
    from alertd.authoring.replay import Recording

    rec = Recording()
    start = T0
    for n in range(4):  # fires, resolves, back 10 minutes later: Alertmanager's batches 5 minutes apart
        fired = start + timedelta(minutes=20 * n)
        rec.webhooks.append(_webhook(fired + timedelta(seconds=30), "firing", fired, None))
        rec.webhooks.append(_webhook(fired + timedelta(minutes=5, seconds=30), "resolved", fired,
                                     fired + timedelta(minutes=4)))
    res = replay(rec, load_rule_set([RULES]))
    assert list(res.run.incidents) == ["INC-1"]
    inc = res.run.incidents["INC-1"]
    assert inc.flaps == 3 and [e.kind for e in inc.timeline].count("reopened") == 3
    sent = [s.item for s, fate in res.run.outcomes() if not fate]
    pages = [i for i in sent if i.target.startswith("pagerduty:gpu-infra|") or i.target == "pagerduty:gpu-infra"]
    assert [str(i.intent) for i in pages].count("page") == 1, [(str(i.intent), i.payload.kinds) for i in pages]


def test_a_plain_webhook_file_replays_and_garbage_fails(tmp_path):
    """A webhook as Alertmanager sends it (the file explain takes) is one webhook, not one decode error per
    line with exit 0; a file that is neither fails with one message."""
    root = Path(__file__).resolve().parents[2]
    out, err = io.StringIO(), io.StringIO()
    code = main(str(root / "examples" / "webhook-gpu-node.json"), rule_paths=None, config=None, as_json_output=True,
                tail=None, until=None, out=out, err=err)
    assert code == 0 and err.getvalue() == "", err.getvalue()
    result = json.loads(out.getvalue())
    assert result["summary"]["webhooks"] == 1 and result["incidents"][0]["xids"] == [79]
    junk = tmp_path / "notes.txt"
    junk.write_text("one\ntwo\nthree\n")
    out, err = io.StringIO(), io.StringIO()
    code = main(str(junk), rule_paths=None, config=None, as_json_output=False, tail=None, until=None, out=out, err=err)
    assert code == 1 and len(err.getvalue().splitlines()) == 2 and "neither a recording" in err.getvalue()
