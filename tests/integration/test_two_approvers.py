"""Two approvers are two principals: one admin token saying ``?by=alice`` then ``?by=bob``, or one Slack user
renamed between two clicks, approves once. The audit trail names the principal and the stated name.

No cluster is needed: the proposal (one that needs two approvals: 8 GPUs evicted, above the policy's
threshold) is written to the store as the leader would write it; approving it only changes the row.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from alertd.remediation.model import PROPOSED, QUARANTINE, Remediation
from alertd.web.keys import SERVICE
from tests.integration.test_auth import HOOK_TOKEN, TOKENS, auth_doc, bearer, open_incident, start
from testkit.kube_gpu_cluster import policy
from testkit.notify_harness import Harness, hook, one_channel, wait_for, xid_alert

SECOND_ADMIN = "adm2-51c8e0b7f3a94d26e8b1"


def proposal(incident_id: str) -> dict:
    now = datetime.now(timezone.utc)
    return Remediation(id=f"{incident_id}/{QUARANTINE}", incident_id=incident_id, cluster="prod", nodes=["gpu-1"],
                       kind=QUARANTINE, action="drain-gpu", policy="gpu-off-the-bus", state=PROPOSED,
                       created_at=now, updated_at=now, dry_run=True, approvals_needed=2,
                       blast={"evictedGpus": 8}).to_dict()


async def test_one_admin_token_with_two_stated_names_approves_once(tmp_path: Path) -> None:
    doc = auth_doc(tmp_path)
    doc["api"]["auth"]["tokens"].append({"name": "boss-2", "role": "admin", "token": SECOND_ADMIN})
    client = await start(tmp_path, doc)
    try:
        incident = await open_incident(client)
        assert await client.server.app[SERVICE].store.put_remediation(proposal(incident), None)
        url = f"/api/v1/incidents/{incident}/remediation/approve"
        boss = bearer(TOKENS["boss"][1])
        first = await client.post(url, params={"by": "alice"}, headers=boss)
        assert first.status == 200, await first.text()
        second = await client.post(url, params={"by": "bob"}, headers=boss)
        assert second.status == 409 and "boss already approved" in (await second.json())["error"]
        rems = (await (await client.get(f"/api/v1/incidents/{incident}/remediations", headers=boss)).json())
        (rem,) = rems["remediations"]
        assert rem["state"] == "proposed"
        assert [(a["principal"], a["actor"]) for a in rem["approvals"]] == [("boss", "alice (boss)")]
        audit = (await (await client.get("/api/v1/audit", headers=boss)).json())["entries"]
        approvals = [(e["actor"], e["outcome"][:7]) for e in reversed(audit) if e["action"] == "remediation_approve"]
        assert approvals == [("alice (boss)", "ok"), ("bob (boss)", "refused")]
        third = await client.post(url, headers=bearer(SECOND_ADMIN))  # another principal: the second approval
        assert third.status == 200, await third.text()
        (rem,) = (await (await client.get(f"/api/v1/incidents/{incident}/remediations", headers=boss)).json())[
            "remediations"]
        assert rem["state"] == "approved" and [a["principal"] for a in rem["approvals"]] == ["boss", "boss-2"]
    finally:
        await client.close()


async def test_a_slack_user_renamed_between_two_clicks_approves_once(tmp_path: Path, slack) -> None:
    h = Harness(tmp_path, slack=slack, routing=one_channel("#gpu-oncall"))
    (tmp_path / "rules" / "remediation.yml").write_text(policy(slack_users=("U0ANA", "U0BEA")))
    await h.start()
    try:
        await h.post(hook(xid_alert("gpu-1", 0)))
        inc = await h.one_incident()
        assert await h.svc.store.put_remediation(proposal(inc["id"]), None)
        assert await h.click("alertd_remediation_approve", inc["id"], user=("U0ANA", "ana")) == 200
        await h.actions_idle()
        assert await h.click("alertd_remediation_approve", inc["id"], user=("U0ANA", "ana.renamed")) == 200
        await h.actions_idle()
        rem = (await h.svc.remediation.for_incident(inc["id"]))[0]
        assert rem["state"] == "proposed" and [a["principal"] for a in rem["approvals"]] == ["slack:U0ANA"]
        audit = [(e.actor, e.outcome[:7]) for e in reversed(await h.svc.store.list_audit(action="remediation_approve"))]
        assert audit == [("ana (slack:U0ANA)", "ok"), ("ana.renamed (slack:U0ANA)", "refused")]
        assert await h.click("alertd_remediation_approve", inc["id"], user=("U0BEA", "bea")) == 200
        await h.actions_idle()
        rem = await wait_for(lambda: _approved(h, inc["id"]))
        assert [a["principal"] for a in rem["approvals"]] == ["slack:U0ANA", "slack:U0BEA"]
    finally:
        await h.stop()


async def _approved(h: Harness, incident_id: str) -> dict | None:
    rem = (await h.svc.remediation.for_incident(incident_id))[0]
    return rem if rem["state"] == "approved" else None


__all__ = ["HOOK_TOKEN"]
