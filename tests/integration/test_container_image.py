"""The image built from the Dockerfile serves, as docs/deploy.md runs it: a named volume for the SQLite
store, the two tokens under /run/secrets, the image's own config. The example webhook, sent with the
webhook token, becomes an incident; after ``rm`` a new container on the same volume still has it.

The image is built by scripts/build-image.sh with podman (on a Debian base made by mmdebstrap, since no
registry is reachable here), or taken from its layer cache. The containers run on the host's network,
listening on a free loopback port (``--listen``) instead of the image's 0.0.0.0:9095."""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.container import Podman, build
from tests.support.fixtures import require
from tests.support.pipeline import wait
from tests.support.process import free_port, http

pytestmark = [pytest.mark.services, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK = ROOT / "examples" / "webhook-gpu-node.json"
CONFIG = "/etc/alertd/alertd.yml"  # the image's


@pytest.fixture(scope="module")
def image() -> Podman:
    return require(build)


@pytest.fixture
def podman(image: Podman) -> Iterator[Podman]:
    yield image
    image.clean()


def serve(podman: Podman, name: str, volume: str, secrets_dir: Path, port: int) -> str:
    """One container as docs/deploy.md starts it, but on the host's loopback; its base URL once ready."""
    podman.run(name, "--network", "host", "-v", f"{volume}:/var/lib/alertd",
               "-v", f"{secrets_dir}:/run/secrets:ro", podman.image,
               "serve", "--config", CONFIG, "--listen", f"127.0.0.1:{port}")
    base = f"http://127.0.0.1:{port}"
    wait(f"{name} ready", lambda: http("GET", base + "/readyz")[0] == 200, timeout=60,
         detail=lambda: podman("logs", name).stderr[-3000:])
    return base


def incidents(base: str, token: str) -> list[dict]:
    status, _, body = http("GET", base + "/api/v1/incidents", headers={"Authorization": f"Bearer {token}"})
    assert status == 200, (status, body)
    listed: list[dict] = json.loads(body)["incidents"]
    return listed


def test_the_image_turns_the_example_webhook_into_an_incident_that_outlives_its_container(podman, tmp_path):
    secrets_dir = tmp_path / "secrets"  # what docs/deploy.md makes with `openssl rand -hex 32`
    secrets_dir.mkdir()
    webhook_token, api_token = secrets.token_hex(32), secrets.token_hex(32)
    (secrets_dir / "alertd_webhook_token").write_text(webhook_token + "\n")
    (secrets_dir / "alertd_api_token").write_text(api_token + "\n")
    tag = f"alertd-test-{os.getpid()}"
    volume = podman.volume(f"{tag}-data")
    port = free_port()

    base = serve(podman, f"{tag}-1", volume, secrets_dir, port)
    url, body = base + "/api/v1/alerts/alertmanager", WEBHOOK.read_bytes()
    json_type = {"Content-Type": "application/json"}
    assert http("POST", url, body, json_type)[0] == 401, "the image's config locks the receiver"
    status, _, answer = http("POST", url, body, {**json_type, "Authorization": f"Bearer {webhook_token}"})
    assert status == 200 and json.loads(answer) == {"status": "stored", "alerts": 3, "truncatedAlerts": 0}
    opened = wait("the incident", lambda: incidents(base, api_token))
    assert len(opened) == 1
    incident = opened[0]
    assert incident["node"] == "gpu-node-17" and 79 in incident["xids"], incident
    assert "alertd.sqlite3" in podman.ok("exec", f"{tag}-1", "ls", "/var/lib/alertd").split()  # on the volume

    podman.ok("rm", "--force", "--time", "10", f"{tag}-1")
    base = serve(podman, f"{tag}-2", volume, secrets_dir, port)
    again = incidents(base, api_token)
    assert [(i["id"], i["openedAt"], i["status"]) for i in again] == [(incident["id"], incident["openedAt"], "open")], again
