"""The Slack message's "Incident" link opens the incident's page without a token: read-only, that page only,
until it expires (alertd/core/signed_links.py; docs/security.md "Signed incident links").

The API and the UI need a token here; the link comes from the message the Slack test server received.
"""
from __future__ import annotations

import html
import json
import re
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest

from alertd.config.settings import parse_config
from alertd.core.signed_links import signature
from testkit.notify_harness import Harness, hook, wait_for, xid_alert

TOKEN = "act0r-t0ken-0123456789"
LINK_KEY = "Zk1xV2d0cE5hR3J0b0x5c2lKc0ZtUTJ3eVpYQjFiRGc="  # openssl rand -base64 32
INCIDENT_LINK = re.compile(r"<(https?://[^|>]+)\|Incident>")


@pytest.fixture
async def linked(tmp_path, slack):
    h = Harness(tmp_path, slack=slack, slack_extra={"links": {"signing_secret": LINK_KEY}})
    doc = dict(h.cfg.raw)
    doc["external_url"] = "https://alertd.example.com"
    doc["api"] = {"auth": {"tokens": [{"name": "oncall", "role": "act", "token": TOKEN}]}}
    h.cfg = parse_config(doc, "test")
    await h.start()
    h.client.session.headers["Authorization"] = f"Bearer {TOKEN}"  # the test's own API calls
    yield h
    await h.stop()


async def _incident_link(h: Harness, slack, node: str, cluster: str) -> tuple[str, str]:
    """An Xid 79 on ``node``: its incident and the link its Slack message carries (one node per cluster, so no
    storm holds the post)."""
    await h.post(hook(xid_alert(node, cluster=cluster), node=node, cluster=cluster))
    inc = (await wait_for(lambda: h.incidents(node=node)))[0]

    def posted() -> str:
        for call in slack.calls_of("chat.postMessage"):
            found = INCIDENT_LINK.search(json.dumps(call.params.get("blocks", "")))
            if found and f"/ui/incidents/{inc['id']}?" in found.group(1):
                return html.unescape(found.group(1))
        return ""

    return inc["id"], await wait_for(posted)


async def _get(h: Harness, path: str, **kw):
    """A browser that never signed in: no token, no cookie."""
    headers = {"Authorization": ""}
    resp = await h.client.get(path, headers=headers, allow_redirects=False, **kw)
    return resp, await resp.text()


async def test_the_slack_link_opens_its_incident_read_only_and_nothing_else(linked, slack):
    h = linked
    incident_id, url = await _incident_link(h, slack, "gpu-l01", "prod")
    other_id, _ = await _incident_link(h, slack, "gpu-l02", "train")
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "alertd.example.com", f"/ui/incidents/{incident_id}")
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    lifetime = datetime.fromtimestamp(int(query["exp"]), timezone.utc) - datetime.now(timezone.utc)
    assert timedelta(days=7) - timedelta(minutes=1) < lifetime <= timedelta(days=7)
    del h.client.session.headers["Authorization"]

    resp, page = await _get(h, f"{parts.path}?{parts.query}")
    assert resp.status == 200 and f"<h1>{incident_id}:" in page and "Xid 79" in page
    assert 'value="ack"' not in page and "RMA handoff" not in page and 'action="/ui/incidents/' not in page  # no buttons
    assert "Set-Cookie" not in resp.headers and resp.headers["Referrer-Policy"] == "no-referrer"
    resp, again = await _get(h, f"{parts.path}?{parts.query}")  # what the page's live update asks (live.js)
    assert resp.status == 200 and f"<h1>{incident_id}:" in again

    # Someone signed in who follows the link gets the page as always, buttons included.
    resp = await h.client.get(f"{parts.path}?{parts.query}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status == 200 and 'value="ack"' in await resp.text()

    # Without the link: the sign-in page, as before.
    resp, _ = await _get(h, parts.path)
    assert resp.status == 303 and resp.headers["Location"].startswith("/ui/login")

    # Tampered, for another incident, expired: a clear 403 and nothing of the incident.
    sig, exp = query["sig"], query["exp"]
    tampered = sig[:-1] + ("A" if sig[-1] != "A" else "B")
    past = int((datetime.now(timezone.utc) - timedelta(minutes=1)).timestamp())
    for path, why in ((f"{parts.path}?exp={exp}&sig={tampered}", "signature does not match"),
                      (f"{parts.path}?exp={int(exp) + 86400}&sig={sig}", "signature does not match"),
                      (f"/ui/incidents/{other_id}?exp={exp}&sig={sig}", "signature does not match"),
                      (f"{parts.path}?exp={past}&sig={signature(LINK_KEY, incident_id, past)}", "This link expired on"),
                      (f"{parts.path}?exp=soon&sig={sig}", "This link is damaged")):
        resp, page = await _get(h, path)
        assert resp.status == 403 and why in page and "Xid 79" not in page, (path, resp.status, page[:300])

    # The link grants nothing else: not the list, the API, the fleet pages, nor an action.
    signed = f"exp={exp}&sig={sig}"
    for path in (f"/ui/incidents?{signed}", f"/ui/incidents/{incident_id}/nodes?{signed}", f"/ui/nodes/gpu-l01?{signed}"):
        resp, _ = await _get(h, path)
        assert resp.status == 303 and resp.headers["Location"].startswith("/ui/login"), path
    resp, _ = await _get(h, f"/api/v1/incidents/{incident_id}?{signed}")
    assert resp.status == 401
    resp = await h.client.post(f"/ui/incidents/{incident_id}/action?{signed}", data={"action": "ack"},
                               headers={"Origin": str(h.client.make_url("")).rstrip("/")}, allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"].startswith("/ui/login")
    h.client.session.headers["Authorization"] = f"Bearer {TOKEN}"
    assert (await h.incident(incident_id))["status"] == "open"
