"""docs/deploy.md's container steps, run as the page writes them: each command of its "Docker" section's
``sh`` blocks goes to bash in a fresh directory (``docker`` being podman on the image's storage), and what
the page shows under a command (its ``# ...`` lines; ``...`` stands for anything) must be in the command's
output. The named volume holds the SQLite store and the two token files lock the doors; after the page's
``docker rm -f`` the same ``docker run`` finds the incident again. A changed option, path, file name or
output on the page fails here.

Only names are the test's own: the container, the volume and the host port (so that runs side by side do
not meet) and the image, which scripts/build-image.sh builds with podman from the same Dockerfile (on a
Debian base made by mmdebstrap, since no registry is reachable here) instead of ``docker build``; the page's
``docker build`` must tag the image its ``docker run`` runs."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from testkit.container import Podman, Step, build, documented_steps
from tests.support.fixtures import require
from testkit.process import free_port, http

pytestmark = [pytest.mark.services, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
DOC_IMAGE, DOC_CONTAINER, DOC_VOLUME, DOC_PORT = "alertd:0.1.0", "alertd", "alertd-data", 9095
SHOWN_WITHIN_S = 60  # a command whose output the page shows is run again until it shows it (start-up, the engine)


@pytest.fixture(scope="module")
def image() -> Podman:
    return require(build)


@pytest.fixture
def podman(image: Podman) -> Iterator[Podman]:
    yield image
    image.clean()


def renamed(line: str, container: str, volume: str, image: str, port: int) -> str:
    """A documented command with the test's names for the page's container, volume, image and host port."""
    line = re.sub(rf"(?<![\w/.-]){re.escape(DOC_IMAGE)}(?![\w.-])", image, line)
    line = re.sub(rf"(?<![\w/.-]){re.escape(DOC_VOLUME)}(?![\w.-])", volume, line)
    line = re.sub(rf"((?:--name|docker exec|docker rm -f) ){DOC_CONTAINER}(?![\w.-])", rf"\g<1>{container}", line)
    return line.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{port}")


def shows(output: str, shown: tuple[str, ...]) -> bool:
    """Each line the page shows is a line of the output (``...``: anything; runs of spaces: any spacing)."""
    lines = output.splitlines()
    for want in shown:
        pattern = r"\s+".join(".*?".join(map(re.escape, part.split("..."))) for part in want.split())
        if not any(re.fullmatch(pattern, line.strip()) for line in lines):
            return False
    return True


def run_step(podman: Podman, line: str, workdir: Path, step: Step) -> str:
    """One command through bash in ``workdir``, ``docker`` being podman; its stdout once it shows what the page
    shows (retried until then), else the failure with its output."""
    docker = shlex.join(podman.argv())
    script = f'docker() {{ {docker} "$@"; }}\nset -eo pipefail\n{line}\n'
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "podman" / "containers.conf")}
    deadline = time.monotonic() + SHOWN_WITHIN_S
    while True:
        done = subprocess.run(["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=120)
        if done.returncode == 0 and shows(done.stdout, step.shows):
            return done.stdout
        if not step.shows or time.monotonic() > deadline:
            raise AssertionError(f"docs/deploy.md: {step.line}\nran: {line}\nexit {done.returncode}\n"
                                 f"page shows: {step.shows}\nstdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}")
        time.sleep(1)


def test_the_documented_container_steps_work_as_written(podman, tmp_path):
    steps = documented_steps()
    built = [s for s in steps if s.line.startswith("docker build ")]
    started = [s for s in steps if s.line.startswith("docker run ")]
    assert len(built) == 1 and len(started) == 1, steps
    assert f"-t {DOC_IMAGE} " in built[0].line and f" {DOC_IMAGE}" in started[0].line, "it runs what it built"
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the page runs from the repository's top
    tag = f"alertd-test-{os.getpid()}"
    names = {"container": tag, "volume": f"{tag}-data", "image": podman.image, "port": free_port()}
    podman.created += [("volume", names["volume"]), ("container", tag)]
    outputs: dict[str, str] = {}
    for step in steps:
        if step not in built:
            outputs[step.line] = run_step(podman, renamed(step.line, **names), tmp_path, step)
    assert len(outputs) >= 8, outputs  # volume, mkdir, two tokens, run; ready, webhook, listing
    base = f"http://127.0.0.1:{names['port']}"
    body = (ROOT / "examples" / "webhook-gpu-node.json").read_bytes()
    json_body = {"Content-Type": "application/json"}
    assert http("POST", base + "/api/v1/alerts/alertmanager", body, json_body)[0] == 401, "no token: it is locked"
    assert http("GET", base + "/api/v1/incidents")[0] == 401
    assert "alertd.sqlite3" in podman.ok("exec", tag, "ls", "/var/lib/alertd").split(), "the store is on the volume"
    listing = next(s for s in steps if " incidents list" in s.line)
    before = outputs[listing.line]

    # "`docker rm -f alertd` and the same `docker run` find every incident again"
    text = (ROOT / "docs" / "deploy.md").read_text()
    again = re.search(r"`(docker rm -f \S+)` and the same\s+`docker run`", text)
    assert again, "docs/deploy.md says how the store outlives its container"
    for step in [Step(again.group(1)), started[0], *(s for s in steps if "/readyz" in s.line), listing]:
        after = run_step(podman, renamed(step.line, **names), tmp_path, step)
    incident = [line for line in before.splitlines() if line.startswith("INC-")]
    assert incident and incident == [line for line in after.splitlines() if line.startswith("INC-")], (before, after)
    assert json.loads(outputs[next(s.line for s in steps if "--data @" in s.line)])["alerts"] == 3
