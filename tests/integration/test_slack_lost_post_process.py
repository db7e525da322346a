"""kill -9 of a real `alertd serve` the moment Slack has taken its post, before the answer is read: the
restarted process (SQLite), or the follower that takes over (two replicas on PostgreSQL), finds the message
in the channel's history by its metadata and edits it; the incident is never posted twice. The Slack test
server kills the process from inside chat.postMessage."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg

from testkit.alertd_proc import AlertdProcess
from testkit.ha_cluster import SLACK_TOKEN, TOKEN as WEBHOOK_TOKEN, fresh_database, replica_config, wait_for_leader
from testkit.loopback import serving_in_thread
from testkit.notify_harness import hook, one_channel, posts, rules_dir, top_messages, xid_alert
from testkit.slack_server import SlackTestServer

TOKEN = "xoxb-lost"


def wait(what: str, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not in {timeout:.0f} s: {what}")


def kill_inside_the_first_post(slack: SlackTestServer, proc: AlertdProcess) -> list[str]:
    """kill -9 ``proc`` when Slack has stored its first top-level post, before the answer leaves; the ts."""
    taken: list[str] = []

    def kill(method: str, params: dict, result: dict) -> None:
        if method == "chat.postMessage" and not params.get("thread_ts") and not taken:
            taken.append(result["ts"])
            os.killpg(proc.pid, signal.SIGKILL)

    slack.after_call = kill
    return taken


def test_kill_9_after_slack_took_the_post_does_not_post_twice(tmp_path: Path) -> None:
    slack = SlackTestServer(token=TOKEN)
    with serving_in_thread(slack):
        proc = AlertdProcess(tmp_path / "alertd", {
            "log": {"level": "info"}, "rules": {"paths": [str(rules_dir(tmp_path, one_channel("#gpu-oncall")))]},
            "notify": {"slack": {"token": TOKEN, "base_url": slack.url, "debounce": "0s"}}}).start()
        taken = kill_inside_the_first_post(slack, proc)
        try:
            assert proc.post(hook(xid_alert("n1", 0)))[0] == 200
            wait("the kill", lambda: taken and not proc.alive())
            with proc.db() as conn:
                (ref,), = conn.execute("SELECT ref FROM notify_refs").fetchall()
            assert ref.startswith("unconfirmed:"), ref  # the write-ahead ref: a post may be out there

            proc.start()  # the same data dir: the outbox item is still pending
            cid = slack.channel_id("#gpu-oncall")

            def saved() -> bool:
                with proc.db() as conn:
                    return conn.execute("SELECT ref FROM notify_refs").fetchall() == [(f"{cid}|{taken[0]}",)]

            wait("the lost post adopted", saved)
            assert len(top_messages(slack, "#gpu-oncall")) == 1 and len(posts(slack, "#gpu-oncall", top=True)) == 1
            (history,) = slack.calls_of("conversations.history")
            assert history.params["channel"] == cid
            assert len(slack.calls_of("conversations.list")) == 1  # the name's id was never answered

            assert proc.post(hook(xid_alert("n1", 1)))[0] == 200  # a change edits the adopted message
            wait("the edit", lambda: slack.messages["#gpu-oncall"][taken[0]]["updates"] >= 1)
            assert len(top_messages(slack, "#gpu-oncall")) == 1 and len(posts(slack, "#gpu-oncall", top=True)) == 1
            assert {c.params["ts"] for c in slack.calls_of("chat.update")} == {taken[0]}
        finally:
            slack.after_call = None
            proc.kill9()


def test_leader_killed_inside_the_post_the_new_leader_adopts_it(tmp_path: Path, postgres) -> None:
    dsn = fresh_database(postgres.dsn)
    slack = SlackTestServer(token=SLACK_TOKEN)
    with serving_in_thread(slack):
        cfg = replica_config(dsn, rules_dir(tmp_path, one_channel("#gpu-oncall")), slack_url=slack.url,
                             log={"level": "info"})
        replicas = [AlertdProcess(tmp_path / f"r{i}", cfg).start() for i in range(2)]
        try:
            leader = wait_for_leader(replicas)
            taken = kill_inside_the_first_post(slack, leader)
            auth = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
            assert leader.post(hook(xid_alert("n1", 0)), auth)[0] == 200
            wait("the kill", lambda: taken and not leader.alive())
            follower = wait_for_leader([r for r in replicas if r is not leader])
            cid = slack.channel_id("#gpu-oncall")

            def refs() -> list:
                with psycopg.connect(dsn, connect_timeout=10) as conn:
                    return conn.execute("SELECT ref FROM notify_refs").fetchall()

            wait("the lost post adopted by the new leader", lambda: refs() == [(f"{cid}|{taken[0]}",)])
            assert len(top_messages(slack, "#gpu-oncall")) == 1 and len(posts(slack, "#gpu-oncall", top=True)) == 1
            assert follower.post(hook(xid_alert("n1", 1)), auth)[0] == 200
            wait("the edit", lambda: slack.messages["#gpu-oncall"][taken[0]]["updates"] >= 1)
            assert len(posts(slack, "#gpu-oncall", top=True)) == 1 and len(slack.calls_of("conversations.history")) == 1
        finally:
            slack.after_call = None
            for replica in replicas:
                replica.kill9()
