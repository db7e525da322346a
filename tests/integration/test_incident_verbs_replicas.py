"""A verb declared once (alertd/core/verbs.py) is carried out by the service on the leader, forwarded by a
follower (alertd/ha/commands.py) and audited, and every door reads it with no table of its own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.core.incident_commands import Annotate
from alertd.core.verbs import VERBS, Declared
from alertd.ha import commands
from alertd.rules.ruleset import load_rules
from alertd.store.sqlite import SqliteStore
from alertd.web.slack_actions import ACTIONS
from testkit.notify_harness import wait_for
from testkit.served import served

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = json.loads((ROOT / "examples" / "webhook-gpu-node.json").read_text())


def snoozed(incident_id: str, actor: str) -> Annotate:
    return Annotate(incident_id, "snoozed", {"by": actor}, "annotated", f"snoozed by {actor}", actor)


@pytest.fixture
def snooze(monkeypatch) -> list[str]:
    """The verb "snooze", declared where every verb is, before the services build their routes; the kinds of
    the commands a follower forwards are collected."""
    monkeypatch.setitem(VERBS, "snooze", Declared("snooze", command=snoozed, audit="snoozed"))
    forwarded: list[str] = []
    forward = commands.forward

    async def counted(store, command, timeout=commands.FORWARD_TIMEOUT):
        forwarded.append(command.kind)
        return await forward(store, command, timeout)
    monkeypatch.setattr(commands, "forward", counted)
    return forwarded


async def replica(path: Path) -> tuple[Service, TestClient]:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "notify": {"console": {"enabled": False}}},
                       "test")
    svc = Service(cfg, SqliteStore(path), load_rules(cfg.rule_paths), role="replica")
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return svc, client


async def test_a_declared_verb_runs_on_the_leader_is_forwarded_by_a_follower_and_is_audited(tmp_path, snooze):
    leader, lead = await replica(tmp_path / "db.sqlite3")
    follower, follow = await replica(tmp_path / "db.sqlite3")
    try:
        assert leader.leading and not follower.leading
        assert (await lead.post("/api/v1/alerts/alertmanager", json=EXAMPLE)).status == 200

        async def opened() -> list[dict]:
            return (await (await follow.get("/api/v1/incidents")).json())["incidents"]
        inc_id = (await wait_for(opened))[0]["id"]

        async def snoozed_by() -> str:
            doc = await (await follow.get(f"/api/v1/incidents/{inc_id}")).json()
            return (doc.get("annotations", {}).get("snoozed") or {}).get("by", "")

        resp = await lead.post(f"/api/v1/incidents/{inc_id}/snooze", params={"by": "ana"})
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["annotations"]["snoozed"] == {"by": "ana (anonymous)"}
        assert snooze == []  # the leader ran it as an engine step

        resp = await follow.post(f"/api/v1/incidents/{inc_id}/snooze", params={"by": "bo"})
        assert resp.status == 200, await resp.text()
        assert snooze == ["annotate"] and await snoozed_by() == "bo (anonymous)"

        await follow.app[ACTIONS].process({"user": {"id": "U0CY", "name": "cy"},
                                           "actions": [{"action_id": "alertd_snooze", "value": inc_id}]})
        assert snooze == ["annotate", "annotate"] and await snoozed_by() == "cy (slack:U0CY)"

        entries = [(e.actor, e.action, e.target, e.via, e.outcome)
                   for e in reversed(await leader.store.list_audit(action="snoozed"))]
        assert entries == [("ana (anonymous)", "snoozed", inc_id, "api", "ok"),
                           ("bo (anonymous)", "snoozed", inc_id, "api", "ok"),
                           ("cy (slack:U0CY)", "snoozed", inc_id, "slack", "ok")]
        timeline = (await (await lead.get(f"/api/v1/incidents/{inc_id}")).json())["timeline"]
        assert [e["text"] for e in timeline if e["text"].startswith("snoozed by")] == [
            "snoozed by ana (anonymous)", "snoozed by bo (anonymous)", "snoozed by cy (slack:U0CY)"]
    finally:
        await follow.close()
        await lead.close()
