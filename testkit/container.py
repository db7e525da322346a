"""The container image, as scripts/build-image.sh builds it, and podman to run it.

podman runs with the storage the script builds in (under the test cache) and with
deploy/podman/containers.conf, which these machines need to start a container at all. A machine
without podman or mmdebstrap, or a user other than root, raises :class:`ServiceUnavailable` (the test
skips, or fails under CI).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from testkit.process import ServiceUnavailable
from testkit.services import CACHE_DIR

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build-image.sh"
CONTAINERS_CONF = ROOT / "deploy" / "podman" / "containers.conf"
TAG = "localhost/alertd:test"
BUILD_TIMEOUT_S = 1200  # cold: about 5 min here (the Debian base, then the dependencies from the registry)


@dataclass
class Podman:
    """podman on the image's storage; what it creates (containers, volumes) goes in :meth:`clean`."""

    image: str
    created: list[tuple[str, str]] = field(default_factory=list)

    def argv(self, *args: str) -> list[str]:
        return ["podman", "--root", str(CACHE_DIR / "podman" / "storage"),
                "--runroot", str(CACHE_DIR / "podman" / "run"), *args]

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=env, timeout=timeout)

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, (done.args, done.stdout, done.stderr)
        return done.stdout.strip()

    def volume(self, name: str) -> str:
        self.ok("volume", "create", name)
        self.created.append(("volume", name))
        return name

    def run(self, name: str, *args: str) -> str:
        """``podman run -d --name NAME ARGS``: ARGS are run's options, the image, then its command."""
        self.created.append(("container", name))
        return self.ok("run", "-d", "--name", name, *args)

    def clean(self) -> None:
        for kind, name in reversed(self.created):
            self(*(("rm", "--force", "--time", "5") if kind == "container" else ("volume", "rm", "--force")), name)
        self.created.clear()


def build() -> Podman:
    """The image from this tree's Dockerfile (its cached layers when nothing they hold changed)."""
    missing = [tool for tool in ("podman", "mmdebstrap", "runc") if shutil.which(tool) is None]
    if missing:
        raise ServiceUnavailable(f"{', '.join(missing)} not installed (Debian packages)")
    if os.geteuid() != 0:
        raise ServiceUnavailable("building the image takes root (mmdebstrap --mode=root, rootful podman)")
    done = subprocess.run(["bash", str(BUILD_SCRIPT), TAG], capture_output=True, text=True,
                          env={**os.environ, "ALERTD_CACHE": str(CACHE_DIR)}, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"scripts/build-image.sh failed:\n{done.stderr[-4000:]}"
    return Podman(image=done.stdout.split()[-1])


def documented_commands(section: str = "## Docker") -> list[list[str]]:
    """The shell commands of a docs/deploy.md section's ``sh`` blocks, each split as the shell splits it
    (continued lines joined, comments dropped; ``$(...)`` and ``$PWD`` left as written)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    body = text.split(section + "\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", body, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def documented(program: str, verb: str) -> list[str]:
    """The one documented command ``program verb ...`` (``docker run``), its arguments after the verb."""
    found = [argv[2:] for argv in documented_commands() if argv[:2] == [program, verb]]
    assert len(found) == 1, (program, verb, found)
    return found[0]


@dataclass(frozen=True)
class Step:
    """One command of a docs/deploy.md ``sh`` block as a shell reads it (continued lines joined), and the
    output the page shows under it (its ``# ...`` lines, the ``# `` taken off)."""

    line: str
    shows: tuple[str, ...] = ()


def documented_steps(section: str = "## Docker", until: str = "**Without a registry.**") -> list[Step]:
    """The ``sh`` blocks of a docs/deploy.md section (up to ``until``), command by command."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    body = text.split(section + "\n", 1)[1].split("\n## ", 1)[0].split(until, 1)[0]
    steps: list[Step] = []
    for block in re.findall(r"```sh\n(.*?)```", body, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("#") and steps:
                steps[-1] = Step(steps[-1].line, (*steps[-1].shows, line[1:].strip()))
            elif line.strip():
                steps.append(Step(line))
    return steps
