"""The Slack, PagerDuty and Kubernetes test servers keep the real services' contracts.

Each server is driven with the client alertd uses against the real service:
slack_sdk's AsyncWebClient, plain aiohttp for the PagerDuty Events API v2, and
kubernetes_asyncio loaded from a kubeconfig.
"""
from __future__ import annotations

import json
import re
import time

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.support.kube_server import KubeTestServer
from tests.support.pagerduty_server import PagerDutyTestServer
from tests.support.slack_server import SlackTestServer

TS = re.compile(r"^\d{10}\.\d{6}$")


# ---------------------------------------------------------------- fixtures


@pytest.fixture
async def slack():
    server = SlackTestServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def web(slack):
    return AsyncWebClient(token="xoxb-test", base_url=slack.base_url)


@pytest.fixture
async def pd():
    server = PagerDutyTestServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def kube(tmp_path):
    server = KubeTestServer()
    await server.start()
    server.sample_cluster()
    yield server
    await server.stop()


@pytest.fixture
async def kapi(kube, tmp_path):
    """A kubernetes_asyncio ApiClient configured from a kubeconfig file written by the server."""
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=str(path), client_configuration=cfg)
    async with k8s.ApiClient(configuration=cfg) as api:
        yield api


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


# ---------------------------------------------------------------- Slack


async def test_slack_base_url_is_the_api_root(slack):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/api/", slack.base_url)


async def test_slack_post_message_with_blocks(slack, web):
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Xid 79 on gpu-node-1"}},
              section("*GPU has fallen off the bus*")]
    resp = await web.chat_postMessage(channel="#gpu-alerts", text="Xid 79 on gpu-node-1", blocks=blocks)
    assert resp["ok"] is True
    assert resp["channel"].startswith("C") and resp["channel"] != "#gpu-alerts"
    assert TS.match(resp["ts"])
    assert resp["message"]["text"] == "Xid 79 on gpu-node-1" and resp["message"]["blocks"] == blocks
    stored = slack.messages[resp["channel"]][resp["ts"]]
    assert stored["blocks"] == blocks and stored["updates"] == 0 and "thread_ts" not in stored
    assert slack.messages["#gpu-alerts"] is slack.messages[resp["channel"]]  # names resolve to the ID
    method, params, at = slack.calls[-1]
    assert method == "chat.postMessage" and params["channel"] == "#gpu-alerts" and at <= time.monotonic()


async def test_slack_ts_are_unique_and_increasing(web):
    seen = []
    for i in range(20):
        resp = await web.chat_postMessage(channel="C0123ABCD", text=f"m{i}")
        seen.append(resp["ts"])
    assert seen == sorted(seen, key=float) and len(set(seen)) == 20


async def test_slack_update_replaces_content(slack, web):
    posted = await web.chat_postMessage(channel="#gpu-alerts", text="firing", blocks=[section("firing")])
    resp = await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="resolved",
                                 blocks=[section("resolved")])
    assert resp["ok"] and resp["channel"] == posted["channel"] and resp["ts"] == posted["ts"]
    assert resp["text"] == "resolved"
    stored = slack.messages[posted["channel"]][posted["ts"]]
    assert stored["text"] == "resolved" and stored["blocks"] == [section("resolved")] and stored["updates"] == 1


async def test_slack_update_unknown_ts_and_channel_name(web):
    posted = await web.chat_postMessage(channel="#gpu-alerts", text="x")
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts="1700000000.000001", text="y")
    assert err.value.response["error"] == "message_not_found"
    with pytest.raises(SlackApiError) as err:  # chat.update wants the channel ID
        await web.chat_update(channel="#gpu-alerts", ts=posted["ts"], text="y")
    assert err.value.response["error"] == "channel_not_found"


async def test_slack_threads(slack, web):
    parent = await web.chat_postMessage(channel="#gpu-alerts", text="incident")
    r1 = await web.chat_postMessage(channel=parent["channel"], text="update 1", thread_ts=parent["ts"])
    r2 = await web.chat_postMessage(channel="#gpu-alerts", text="update 2", thread_ts=parent["ts"])
    assert r1["message"]["thread_ts"] == parent["ts"]
    assert [m["text"] for m in slack.replies(parent["channel"], parent["ts"])] == ["update 1", "update 2"]
    assert slack.messages[parent["channel"]][parent["ts"]]["reply_count"] == 2
    for bad in ("1700000000.000001", r2["ts"]):  # unknown, or a reply rather than a parent
        with pytest.raises(SlackApiError) as err:
            await web.chat_postMessage(channel="#gpu-alerts", text="x", thread_ts=bad)
        assert err.value.response["error"] == "thread_not_found"
    with pytest.raises(SlackApiError) as err:  # the parent is in another channel
        await web.chat_postMessage(channel="#other", text="x", thread_ts=parent["ts"])
    assert err.value.response["error"] == "thread_not_found"


async def test_slack_auth_errors(slack):
    with pytest.raises(SlackApiError) as err:
        await AsyncWebClient(token="xoxb-wrong", base_url=slack.base_url).chat_postMessage(channel="#a", text="x")
    assert err.value.response.status_code == 200 and err.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as err:
        await AsyncWebClient(base_url=slack.base_url).chat_postMessage(channel="#a", text="x")
    assert err.value.response["error"] == "not_authed"
    assert slack.messages == {}


async def test_slack_auth_test(web):
    resp = await web.auth_test()
    assert resp["ok"] and resp["user_id"] and resp["bot_id"]


async def test_slack_channel_validation(slack):
    restricted = SlackTestServer(channels={"#gpu-alerts": "C0GPUALERT"})
    base_url = await restricted.start()
    try:
        web = AsyncWebClient(token="xoxb-test", base_url=base_url)
        resp = await web.chat_postMessage(channel="#gpu-alerts", text="x")
        assert resp["channel"] == "C0GPUALERT"
        assert (await web.chat_postMessage(channel="C0GPUALERT", text="y"))["channel"] == "C0GPUALERT"
        for channel in ("#random", "C0NOTTHERE", ""):
            with pytest.raises(SlackApiError) as err:
                await web.chat_postMessage(channel=channel, text="x")
            assert err.value.response["error"] == "channel_not_found"
    finally:
        await restricted.stop()
    # default: '#name' or a C... ID exists, anything else does not
    web = AsyncWebClient(token="xoxb-test", base_url=slack.base_url)
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="gpu-alerts", text="x")
    assert err.value.response["error"] == "channel_not_found"


async def test_slack_no_text(web):
    with pytest.raises(SlackApiError) as err, pytest.warns(UserWarning, match="text"):
        await web.chat_postMessage(channel="#gpu-alerts", text="")
    assert err.value.response["error"] == "no_text"
    # blocks alone are enough (slack_sdk warns that the fallback text is missing)
    with pytest.warns(UserWarning, match="text"):
        assert (await web.chat_postMessage(channel="#gpu-alerts", blocks=[section("only blocks")]))["ok"]


@pytest.mark.parametrize("blocks, pointer", [
    ([section(f"b{i}") for i in range(51)], "/blocks"),
    ([section("x" * 3001)], "/blocks/0/text/text"),
    ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "/blocks/0/text/text"),
    ([{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}], "/blocks/0/text/type"),
    ([section("")], "/blocks/0/text/text"),
    ([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}], "/blocks/0/fields"),
    ([{"type": "bogus"}], "/blocks/0/type"),
])
async def test_slack_invalid_blocks(web, blocks, pointer):
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#gpu-alerts", text="x", blocks=blocks)
    assert err.value.response["error"] == "invalid_blocks"
    assert any(f"[json-pointer:{pointer}]" in e for e in err.value.response["errors"])


async def test_slack_block_limits_are_inclusive(web):
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[section(f"b{i}") for i in range(50)]))["ok"]
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[section("x" * 3000)]))["ok"]
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[header]))["ok"]


async def test_slack_update_validates_blocks(web):
    posted = await web.chat_postMessage(channel="#a", text="x")
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="y",
                              blocks=[section(str(i)) for i in range(51)])
    assert err.value.response["error"] == "invalid_blocks"


async def test_slack_429_surfaces_with_retry_after(slack, web):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#gpu-alerts", text="x")
    resp = err.value.response
    assert resp.status_code == 429 and resp["error"] == "ratelimited"
    assert resp.headers["Retry-After"] == "1"
    assert slack.messages == {}
    assert (await web.chat_postMessage(channel="#gpu-alerts", text="x"))["ok"]  # only the next call failed


async def test_slack_rate_limit_retry_handler_retries(slack):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    web = AsyncWebClient(token="xoxb-test", base_url=slack.base_url,
                         retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    started = time.monotonic()
    resp = await web.chat_postMessage(channel="#gpu-alerts", text="x")
    assert resp["ok"] and time.monotonic() - started >= 1.0
    assert [c.method for c in slack.calls] == ["chat.postMessage", "chat.postMessage"]
    assert slack.calls[1].at - slack.calls[0].at >= 1.0


async def test_slack_server_error_and_delay(slack, web):
    slack.fail_next("chat.update", status=500)
    posted = await web.chat_postMessage(channel="#a", text="x")  # other methods unaffected
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="y")
    assert err.value.response.status_code == 500
    slack.fail_next(status=200, error="fatal_error")
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#a", text="x")
    assert err.value.response["error"] == "fatal_error"
    slack.delay = 0.3
    started = time.monotonic()
    await web.chat_postMessage(channel="#a", text="slow")
    assert time.monotonic() - started >= 0.3


async def test_slack_per_channel_rate_limit(http):
    server = SlackTestServer(rate_limit_per_channel_per_s=1.0)
    base_url = await server.start()
    try:
        web = AsyncWebClient(token="xoxb-test", base_url=base_url)
        await web.chat_postMessage(channel="#a", text="1")
        with pytest.raises(SlackApiError) as err:
            await web.chat_postMessage(channel="#a", text="2")
        assert err.value.response.status_code == 429 and err.value.response.headers["Retry-After"] == "1"
        assert (await web.chat_postMessage(channel="#b", text="other channel"))["ok"]
    finally:
        await server.stop()


async def test_slack_form_encoded_and_token_argument(slack, http):
    blocks = [section("form")]
    form = {"token": "xoxb-test", "channel": "#gpu-alerts", "text": "via form", "blocks": json.dumps(blocks)}
    async with http.post(slack.base_url + "chat.postMessage", data=form) as resp:
        body = await resp.json()
    assert resp.status == 200 and body["ok"], body
    assert slack.messages[body["channel"]][body["ts"]]["blocks"] == blocks
    # a JSON body cannot carry the token, and JSON without charset draws Slack's warning
    async with http.post(slack.base_url + "chat.postMessage",
                         data=json.dumps({"token": "xoxb-test", "channel": "#a", "text": "x"}),
                         headers={"Content-Type": "application/json"}) as resp:
        body = await resp.json()
    assert body == {"ok": False, "error": "not_authed", "response_metadata": {"warnings": ["missing_charset"]}}
    async with http.post(slack.base_url + "chat.postMessage", data={"channel": "#a", "text": "x",
                                                                    "blocks": "[not json"},
                         headers={"Authorization": "Bearer xoxb-test"}) as resp:
        assert (await resp.json())["error"] == "invalid_blocks_format"


# ---------------------------------------------------------------- PagerDuty


def trigger(dedup_key: str | None = "incident-42", **payload) -> dict:
    event = {
        "routing_key": PagerDutyTestServer.ROUTING_KEY,
        "event_action": "trigger",
        "payload": {"summary": "Xid 79 on gpu-node-1", "source": "gpu-node-1", "severity": "critical",
                    "timestamp": "2025-01-02T03:04:05.678+0000", "component": "gpu", "group": "prod",
                    "class": "xid", "custom_details": {"xid": 79, "gpu": "3"}, **payload},
        "links": [{"href": "https://alertd.example/incidents/42", "text": "incident"}],
    }
    if dedup_key is not None:
        event["dedup_key"] = dedup_key
    return event


def follow_up(action: str, dedup_key: str = "incident-42") -> dict:
    return {"routing_key": PagerDutyTestServer.ROUTING_KEY, "event_action": action, "dedup_key": dedup_key}


async def send(http, url, body) -> tuple[int, dict]:
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def test_pagerduty_trigger_accepted(pd, http):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v2/enqueue", pd.url)
    status, body = await send(http, pd.url, trigger())
    assert status == 202
    assert body == {"status": "success", "message": "Event processed", "dedup_key": "incident-42"}
    assert pd.events[-1]["payload"]["summary"] == "Xid 79 on gpu-node-1"
    assert pd.status_of("incident-42") == "triggered"


async def test_pagerduty_trigger_without_dedup_key_gets_one(pd, http):
    status, body = await send(http, pd.url, trigger(dedup_key=None))
    assert status == 202 and body["dedup_key"] and pd.status_of(body["dedup_key"]) == "triggered"


async def test_pagerduty_missing_severity_is_rejected(pd, http):
    event = trigger()
    del event["payload"]["severity"]
    status, body = await send(http, pd.url, event)
    assert status == 400
    assert body == {"status": "invalid event", "message": "Event object is invalid",
                    "errors": ["'payload.severity' is missing or blank"]}
    assert pd.events == [] and pd.rejected[-1][0] == 400 and pd.alerts == {}


@pytest.mark.parametrize("mutate, needle", [
    (lambda e: e.update(routing_key="short"), "Length of 'routing_key'"),
    (lambda e: e.update(routing_key="X" * 32), "Invalid routing key"),
    (lambda e: e.update(event_action="escalate"), "'event_action'"),
    (lambda e: e["payload"].update(severity="high"), "'payload.severity'"),
    (lambda e: e["payload"].update(summary="s" * 1025), "'payload.summary' is too long"),
    (lambda e: e["payload"].pop("source"), "'payload.source' is missing"),
    (lambda e: e["payload"].update(timestamp="yesterday"), "'payload.timestamp'"),
    (lambda e: e["payload"].update(custom_details="text"), "'payload.custom_details'"),
    (lambda e: e.update(dedup_key="k" * 256), "'dedup_key' is too long"),
    (lambda e: e.update(links=[{"text": "no href"}]), "'links[0].href'"),
    (lambda e: e.update(images=[{"href": "https://x"}]), "'images[0].src'"),
    (lambda e: e.pop("payload"), "'payload' is missing"),
])
async def test_pagerduty_rejects_invalid_events(pd, http, mutate, needle):
    event = trigger()
    mutate(event)
    status, body = await send(http, pd.url, event)
    assert status == 400 and body["status"] == "invalid event"
    assert any(needle in e for e in body["errors"]), body


async def test_pagerduty_limits_are_inclusive(pd, http):
    status, _ = await send(http, pd.url, trigger(dedup_key="k" * 255, summary="s" * 1024))
    assert status == 202


async def test_pagerduty_follow_ups_need_dedup_key_and_non_json_is_rejected(pd, http):
    status, body = await send(http, pd.url, {"routing_key": PagerDutyTestServer.ROUTING_KEY,
                                             "event_action": "resolve"})
    assert status == 400 and "'dedup_key' is missing or blank" in body["errors"]
    async with http.post(pd.url, data="not json", headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400


async def test_pagerduty_lifecycle_resolve_then_trigger_opens_a_new_alert(pd, http):
    for event in (trigger(), trigger(), follow_up("acknowledge"), trigger(), follow_up("resolve")):
        status, _ = await send(http, pd.url, event)
        assert status == 202
    [first] = pd.alerts["incident-42"]
    assert first["status"] == "resolved"
    assert [h["action"] for h in first["history"]] == ["trigger", "trigger", "acknowledge", "trigger", "resolve"]
    assert [h["status"] for h in first["history"]] == ["triggered", "triggered", "acknowledged", "acknowledged",
                                                       "resolved"]
    status, _ = await send(http, pd.url, trigger())
    assert status == 202
    assert len(pd.alerts["incident-42"]) == 2
    assert pd.alerts["incident-42"][1]["status"] == "triggered" and pd.open_alert("incident-42") is not None
    assert pd.alerts["incident-42"][0]["id"] != pd.alerts["incident-42"][1]["id"]


async def test_pagerduty_follow_up_without_open_alert_is_dropped(pd, http):
    status, body = await send(http, pd.url, follow_up("resolve", "never-triggered"))
    assert status == 202 and body["dedup_key"] == "never-triggered"
    assert pd.alerts == {} and pd.dropped[-1]["dedup_key"] == "never-triggered"


async def test_pagerduty_fault_injection(pd, http):
    pd.fail_next(status=429)
    pd.fail_next(status=500, count=2)
    assert (await send(http, pd.url, trigger()))[0] == 429
    assert (await send(http, pd.url, trigger()))[0] == 500
    assert (await send(http, pd.url, trigger()))[0] == 500
    assert pd.events == []
    assert (await send(http, pd.url, trigger()))[0] == 202
    pd.delay = 0.2
    started = time.monotonic()
    await send(http, pd.url, follow_up("resolve"))
    assert time.monotonic() - started >= 0.2
    assert len(pd.requests) == 5


# ---------------------------------------------------------------- Kubernetes


async def test_kube_kubeconfig_is_loadable(kube, tmp_path):
    path = kube.write_kubeconfig(tmp_path / "kc")
    api = await k8s_config.new_client_from_config(config_file=str(path))
    async with api:
        version = await k8s.VersionApi(api).get_code()
        assert version.git_version.startswith("v1.")
        nodes = await k8s.CoreV1Api(api).list_node()
        assert [n.metadata.name for n in nodes.items] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]


async def test_kube_pods_on_a_node(kube, kapi):
    v1 = k8s.CoreV1Api(kapi)
    pods = await v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-1")
    assert isinstance(pods, k8s.V1PodList) and pods.metadata.resource_version
    assert {p.spec.node_name for p in pods.items} == {"gpu-node-1"}
    by_name = {p.metadata.name: p for p in pods.items}
    master = by_name["llama-finetune-master-0"]
    assert master.spec.containers[0].resources.limits["nvidia.com/gpu"] == "4"
    assert master.status.phase == "Running"
    assert master.metadata.owner_references[0].kind == "PyTorchJob"
    assert master.metadata.owner_references[0].controller is True
    running = await v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-1,status.phase!=Succeeded")
    assert len(running.items) == len(pods.items) - 1
    assert all(p.status.phase != "Succeeded" for p in running.items)
    assert kube.requests_to("/api/v1/pods")[0].query["fieldSelector"] == "spec.nodeName=gpu-node-1"


async def test_kube_mig_pod(kapi):
    pods = await k8s.CoreV1Api(kapi).list_namespaced_pod(
        "research", label_selector="ray.io/cluster=ray-serve,ray.io/node-type=worker")
    [worker] = pods.items
    assert worker.spec.containers[0].resources.limits == {"nvidia.com/mig-1g.10gb": "1", "memory": "32Gi"}
    assert worker.spec.node_name == "gpu-node-3"
    assert worker.metadata.owner_references[0].kind == "RayCluster"


@pytest.mark.parametrize("selector, expected", [
    ("training.kubeflow.org/job-name=llama-finetune", {"llama-finetune-master-0", "llama-finetune-worker-0"}),
    ("training.kubeflow.org/replica-type in (master)", {"llama-finetune-master-0"}),
    ("training.kubeflow.org/job-name,training.kubeflow.org/replica-type!=master", {"llama-finetune-worker-0"}),
    ("jobset.sigs.k8s.io/jobset-name", None),  # exists
    ("!jobset.sigs.k8s.io/jobset-name,!training.kubeflow.org/job-name", None),
    ("jobset.sigs.k8s.io/job-index notin (0)", None),
])
async def test_kube_label_selectors(kube, kapi, selector, expected):
    pods = await k8s.CoreV1Api(kapi).list_namespaced_pod("ml-training", label_selector=selector)
    names = {p.metadata.name for p in pods.items}
    if expected is not None:
        assert names == expected
    elif selector == "jobset.sigs.k8s.io/jobset-name":
        assert len(names) == 2 and all(n.startswith("pretrain-7b-trainer-") for n in names)
    elif selector.startswith("!"):
        assert names == {n for n in names if n.startswith("nccl-test-")} and len(names) == 1
    else:  # notin matches pods without the label too
        assert "pretrain-7b-trainer-1-0-" in " ".join(names) and "llama-finetune-master-0" in names
        assert not any(n.startswith("pretrain-7b-trainer-0-") for n in names)


async def test_kube_read_node(kapi):
    v1 = k8s.CoreV1Api(kapi)
    cordoned = await v1.read_node("gpu-node-2")
    assert isinstance(cordoned, k8s.V1Node)
    assert cordoned.spec.unschedulable is True
    assert [t.key for t in cordoned.spec.taints] == ["node.kubernetes.io/unschedulable"]
    assert cordoned.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert cordoned.metadata.labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert cordoned.status.capacity["nvidia.com/gpu"] == "8"
    cordon_by = [m for m in cordoned.metadata.managed_fields if "f:unschedulable" in m.fields_v1.get("f:spec", {})]
    assert [m.manager for m in cordon_by] == ["kubectl-cordon"] and cordon_by[0].time is not None
    healthy = await v1.read_node("gpu-node-1")
    assert healthy.spec.unschedulable is None and healthy.spec.taints is None  # omitted, as the real API does
    down = await v1.read_node("gpu-node-3")
    ready = next(c for c in down.status.conditions if c.type == "Ready")
    assert ready.status == "Unknown" and ready.reason == "NodeStatusUnknown"
    assert {t.key for t in down.spec.taints} == {"node.kubernetes.io/unreachable"}
    assert down.status.capacity["nvidia.com/mig-1g.10gb"] == "56"
    gpu_nodes = await v1.list_node(label_selector="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
    assert [n.metadata.name for n in gpu_nodes.items] == ["gpu-node-1", "gpu-node-2"]
    unschedulable = await v1.list_node(field_selector="spec.unschedulable=true")
    assert [n.metadata.name for n in unschedulable.items] == ["gpu-node-2"]


async def test_kube_node_events(kapi):
    v1 = k8s.CoreV1Api(kapi)
    events = await v1.list_namespaced_event(
        "default", field_selector="involvedObject.name=gpu-node-2,involvedObject.kind=Node")
    [cordon] = events.items
    assert cordon.reason == "NodeNotSchedulable" and cordon.type == "Normal"
    assert cordon.source.component == "kubelet" and cordon.source.host == "gpu-node-2"
    assert cordon.involved_object.kind == "Node" and cordon.count == 1
    assert cordon.first_timestamp is not None and cordon.last_timestamp >= cordon.first_timestamp
    not_ready = await v1.list_event_for_all_namespaces(field_selector="reason=NodeNotReady")
    kinds = sorted((e.involved_object.kind, e.source.component) for e in not_ready.items)
    assert kinds == [("Node", "node-controller"), ("Pod", "node-controller"), ("Pod", "node-controller")]
    warnings = await v1.list_namespaced_event("research", field_selector="type=Warning,involvedObject.kind=Pod")
    assert len(warnings.items) == 2 and all(e.involved_object.namespace == "research" for e in warnings.items)


async def test_kube_owner_chains(kube, kapi):
    v1, batch, custom = k8s.CoreV1Api(kapi), k8s.BatchV1Api(kapi), k8s.CustomObjectsApi(kapi)
    # PyTorchJob owns its pods directly
    ptj = await custom.get_namespaced_custom_object("kubeflow.org", "v1", "ml-training", "pytorchjobs",
                                                    "llama-finetune")
    assert ptj["kind"] == "PyTorchJob" and ptj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    master = await v1.read_namespaced_pod("llama-finetune-master-0", "ml-training")
    assert master.metadata.owner_references[0].uid == ptj["metadata"]["uid"]
    # Pod -> Job -> JobSet
    [pod] = (await v1.list_namespaced_pod("ml-training", label_selector="job-name=pretrain-7b-trainer-0")).items
    ref = pod.metadata.owner_references[0]
    assert (ref.api_version, ref.kind, ref.name) == ("batch/v1", "Job", "pretrain-7b-trainer-0")
    job = await batch.read_namespaced_job(ref.name, "ml-training")
    assert isinstance(job, k8s.V1Job) and job.metadata.uid == ref.uid
    job_owner = job.metadata.owner_references[0]
    assert (job_owner.api_version, job_owner.kind, job_owner.name) == ("jobset.x-k8s.io/v1alpha2", "JobSet",
                                                                       "pretrain-7b")
    jobset = await custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ml-training", "jobsets",
                                                       "pretrain-7b")
    assert jobset["metadata"]["uid"] == job_owner.uid
    # RayCluster
    ray = await custom.get_namespaced_custom_object("ray.io", "v1", "research", "rayclusters", "ray-serve")
    ray_pods = await v1.list_namespaced_pod("research", label_selector="ray.io/cluster=ray-serve")
    assert {p.metadata.owner_references[0].uid for p in ray_pods.items} == {ray["metadata"]["uid"]}
    # DaemonSet-owned pods carry no GPUs
    ds = await k8s.AppsV1Api(kapi).read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    assert ds.status.desired_number_scheduled == 3


async def test_kube_namespace(kapi):
    ns = await k8s.CoreV1Api(kapi).read_namespace("ml-training")
    assert ns.metadata.labels["team"] == "ml-platform" and ns.metadata.labels["owner"] == "alice"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "ml-training"
    assert ns.metadata.annotations and ns.status.phase == "Active"


async def test_kube_not_found_is_a_status(kube, kapi):
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).read_namespaced_pod("nope", "ml-training")
    assert err.value.status == 404
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["reason"] == "NotFound" and body["code"] == 404 and body["message"] == 'pods "nope" not found'
    with pytest.raises(ApiException) as err:
        await k8s.CustomObjectsApi(kapi).get_namespaced_custom_object("kubeflow.org", "v2beta1", "ml-training",
                                                                      "mpijobs", "nope")
    body = json.loads(err.value.body)
    assert body["message"] == 'mpijobs.kubeflow.org "nope" not found'
    assert body["details"] == {"name": "nope", "group": "kubeflow.org", "kind": "mpijobs"}
    with pytest.raises(ApiException) as err:  # a CRD that is not installed
        await k8s.CustomObjectsApi(kapi).get_namespaced_custom_object("example.com", "v1", "ml-training",
                                                                      "widgets", "w")
    assert err.value.status == 404 and err.value.body.startswith("404 page not found")


async def test_kube_rejects_bad_token_and_unsupported_selectors(kube, kapi, tmp_path):
    cfg = k8s.Configuration()
    cfg.host = kube.url
    cfg.api_key = {"BearerToken": "Bearer wrong"}
    async with k8s.ApiClient(configuration=cfg) as bad:
        with pytest.raises(ApiException) as err:
            await k8s.CoreV1Api(bad).list_node()
    assert err.value.status == 401 and json.loads(err.value.body)["reason"] == "Unauthorized"
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).list_pod_for_all_namespaces(field_selector="spec.nodename=gpu-node-1")
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == "field label not supported: spec.nodename"
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).list_pod_for_all_namespaces(label_selector="a in b")
    assert err.value.status == 400


async def test_kube_raw_list_shape_and_request_log(kube, http):
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with http.get(kube.url + "/api/v1/namespaces/ml-training/pods", headers=headers) as resp:
        body = await resp.json()
    assert resp.status == 200
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1" and body["metadata"]["resourceVersion"]
    assert body["items"] and all("kind" not in i and "apiVersion" not in i for i in body["items"])
    names = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
    assert names == sorted(names)
    async with http.get(kube.url + "/apis/kubeflow.org/v1/pytorchjobs", headers=headers) as resp:
        body = await resp.json()
    assert body["kind"] == "PyTorchJobList" and body["items"][0]["kind"] == "PyTorchJob"  # CRs keep theirs
    async with http.get(kube.url + "/api/v1/nodes") as resp:
        assert resp.status == 401 and (await resp.json())["kind"] == "Status"
    assert kube.count("/api/v1/namespaces/ml-training/pods") == 1
    assert kube.requests[-1] == ("GET", "/api/v1/nodes", {})


async def test_kube_pagination(kapi):
    v1 = k8s.CoreV1Api(kapi)
    first = await v1.list_pod_for_all_namespaces(limit=4)
    assert len(first.items) == 4 and first.metadata._continue and first.metadata.remaining_item_count > 0
    rest = await v1.list_pod_for_all_namespaces(limit=100, _continue=first.metadata._continue)
    everything = await v1.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in first.items + rest.items] == [p.metadata.name for p in everything.items]


async def test_kube_fault_injection_and_discovery(kube, kapi):
    kube.fail_next(status=500, path="/api/v1/nodes")
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).read_node("gpu-node-1")
    assert err.value.status == 500
    assert (await k8s.CoreV1Api(kapi).read_node("gpu-node-1")).metadata.name == "gpu-node-1"
    groups = await k8s.ApisApi(kapi).get_api_versions()
    assert {"batch", "apps", "kubeflow.org", "ray.io", "jobset.x-k8s.io"} <= {g.name for g in groups.groups}
    resources = await k8s.CoreV1Api(kapi).get_api_resources()
    assert {"pods", "nodes", "events", "namespaces"} <= {r.name for r in resources.resources}
