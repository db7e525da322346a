"""The history explains itself: since the layout by layer, every commit subject has an area prefix
and at most 72 characters, like the projects alertd lives beside (Prometheus, Alertmanager)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SINCE = "c9b34d2"  # layout: one package per layer, checked by a layering test
# Written on branches that forked before this check existed, 73-75 characters long: kept, not rewritten.
GRANDFATHERED = {"6e23c10", "ab96827", "7744f11", "52aebc9"}
SUBJECT = re.compile(r"^[a-z0-9][a-z0-9/_.,-]*(, [a-z0-9/_.-]+)*: \S")


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)


def _subjects() -> list[str]:
    if shutil.which("git") is None or _git("rev-parse", "--verify", "--quiet", f"{SINCE}^{{commit}}").returncode:
        pytest.skip(f"not a git checkout with {SINCE} in its history (a shallow clone or an unpacked archive)")
    lines = _git("log", "--no-merges", "--format=%h %s", "--abbrev=7", f"{SINCE}~1..HEAD").stdout.splitlines()
    return [subject for sha, _, subject in (line.partition(" ") for line in lines) if sha not in GRANDFATHERED]


def bad_subjects(subjects: list[str]) -> list[str]:
    return [s for s in subjects if len(s) > 72 or not SUBJECT.match(s)]


def test_commit_subjects_are_short_and_name_their_area() -> None:
    subjects = _subjects()
    assert subjects, "the history since the layout commit is empty"
    assert bad_subjects(subjects) == []


def test_the_check_rejects_a_long_or_unprefixed_subject() -> None:
    assert bad_subjects(["engine: reopen within the hour", "Fix stuff", "web: " + "x" * 70]) == [
        "Fix stuff", "web: " + "x" * 70]
