"""The image built from the Dockerfile serves, as docs/deploy.md runs it: a named volume for the SQLite
store, the two tokens under /run/secrets, the image's own config. The example webhook, sent with the
webhook token, becomes an incident; after ``rm`` a new container on the same volume still has it.

The steps are docs/deploy.md's own, read from it: its volumes, its token files, its curl's header, its
listing. The image is built by scripts/build-image.sh with podman (on a Debian base made by mmdebstrap,
since no registry is reachable here), or taken from its layer cache. The containers run on the host's
network, listening on a free loopback port (``--listen``) instead of the image's 0.0.0.0:9095."""
from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.container import Podman, build, documented, documented_commands
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


def mounts(volume: str, workdir: Path) -> list[str]:
    """docs/deploy.md's ``docker run`` volumes: its named volume made this test's, ``$PWD`` the work dir."""
    options = documented("docker", "run")
    out = []
    for v in (v for flag, v in zip(options, options[1:]) if flag == "-v"):
        source, rest = v.split(":", 1)
        source = volume if not source.startswith(("/", "$")) else source.replace("$PWD", str(workdir))
        out += ["-v", f"{source}:{rest}"]
    return out


def prepare(workdir: Path) -> dict[str, str]:
    """docs/deploy.md's ``mkdir`` and ``openssl rand -hex 32 > FILE``, done in ``workdir``: the tokens."""
    tokens = {}
    for argv in documented_commands():
        if argv[0] == "mkdir":
            for d in argv[2:]:
                (workdir / d).mkdir(parents=True, exist_ok=True)
        elif argv[:4] == ["openssl", "rand", "-hex", "32"] and argv[4] == ">":
            tokens[argv[5]] = secrets.token_hex(32)
            (workdir / argv[5]).write_text(tokens[argv[5]] + "\n")
    return tokens


def serve(podman: Podman, name: str, volumes: list[str], port: int) -> str:
    """One container as docs/deploy.md starts it, but on the host's loopback; its base URL once ready."""
    podman.run(name, "--network", "host", *volumes, podman.image,
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


def documented_webhook_headers(tokens: dict[str, str]) -> dict[str, str]:
    """The headers of docs/deploy.md's curl of the example webhook, its ``$(cat FILE)`` read."""
    curl = next(argv for argv in documented_commands() if argv[0] == "curl" and "--data" in argv)
    assert f"@{WEBHOOK.relative_to(ROOT)}" in curl
    headers = dict(curl[i + 1].split(": ", 1) for i, a in enumerate(curl) if a == "-H")
    return {k: re.sub(r"\$\(cat (\S+)\)", lambda m: tokens[m.group(1)], v) for k, v in headers.items()}


def test_the_image_turns_the_example_webhook_into_an_incident_that_outlives_its_container(podman, tmp_path):
    tokens = prepare(tmp_path)
    tag = f"alertd-test-{os.getpid()}"
    volumes = mounts(podman.volume(f"{tag}-data"), tmp_path)
    port = free_port()

    base = serve(podman, f"{tag}-1", volumes, port)
    url, body = base + "/api/v1/alerts/alertmanager", WEBHOOK.read_bytes()
    headers = documented_webhook_headers(tokens)
    assert http("POST", url, body, {"Content-Type": "application/json"})[0] == 401, "the image's config locks it"
    status, _, answer = http("POST", url, body, headers)
    assert status == 200 and json.loads(answer) == {"status": "stored", "alerts": 3, "truncatedAlerts": 0}
    api_token = tokens["secrets/alertd_api_token"]
    opened = wait("the incident", lambda: incidents(base, api_token))
    assert len(opened) == 1
    incident = opened[0]
    assert incident["node"] == "gpu-node-17" and 79 in incident["xids"], incident
    assert "alertd.sqlite3" in podman.ok("exec", f"{tag}-1", "ls", "/var/lib/alertd").split()  # on the volume

    podman.ok("rm", "--force", "--time", "10", f"{tag}-1")
    base = serve(podman, f"{tag}-2", volumes, port)
    # docs/deploy.md's listing, in the new container (on this test's port instead of 9095).
    listing = documented("docker", "exec")[1:] + ["--url", f"127.0.0.1:{port}"]
    listed = podman.ok("exec", f"{tag}-2", *listing)
    assert f"{incident['id']}  open    critical  gpu-node-17  79" in listed, listed
    again = incidents(base, api_token)
    assert [(i["id"], i["openedAt"], i["status"]) for i in again] == [(incident["id"], incident["openedAt"], "open")]
