"""kill -9 of a real `alertd serve` the moment Slack has taken its post, before the answer is read: the
restarted process finds the message in the channel's history by its metadata and edits it; the incident
is never posted twice. The Slack test server kills the process from inside chat.postMessage."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.alertd_proc import AlertdProcess
from tests.support.loopback import serving_in_thread
from tests.support.notify_harness import hook, one_channel, posts, rules_dir, top_messages, xid_alert
from tests.support.slack_server import SlackTestServer

TOKEN = "xoxb-lost"


def wait(what: str, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not in {timeout:.0f} s: {what}")


def test_kill_9_after_slack_took_the_post_does_not_post_twice(tmp_path: Path) -> None:
    slack = SlackTestServer(token=TOKEN)
    with serving_in_thread(slack):
        proc = AlertdProcess(tmp_path / "alertd", {
            "log": {"level": "info"}, "rules": {"paths": [str(rules_dir(tmp_path, one_channel("#gpu-oncall")))]},
            "notify": {"slack": {"token": TOKEN, "base_url": slack.url, "debounce": "0s"}}}).start()
        taken: list[str] = []

        def die_before_the_answer(method: str, params: dict, result: dict) -> None:
            if method == "chat.postMessage" and not params.get("thread_ts") and not taken:
                taken.append(result["ts"])
                os.killpg(proc.pid, signal.SIGKILL)

        slack.after_call = die_before_the_answer
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
