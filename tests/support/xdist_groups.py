"""``--dist loadgroup`` that keeps working when xdist cannot: the groups reach the scheduler in a file.

pytest-xdist's loadgroup passes a test's ``xdist_group`` to its scheduler by appending ``@group`` to the
node id on the worker; pytest 9.2 builds node ids from a structured id that this no longer changes, so
the groups are silently dropped and every worker starts every service (pytest-xdist issue #1386). Here
the controller gives each worker a file name (``workerinput``), each worker writes ``{nodeid: group}``
for the tests it collected (``record``) before it reports its collection, and the scheduler, which only
runs once every worker has reported, reads the map. An ``@group`` suffix, should xdist add it again,
still counts.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

KEY = "alertd_xdist_groups"
_DIRECTORY = pytest.StashKey[Path]()  # the controller's directory of group files

try:
    from xdist.scheduler import LoadGroupScheduling
except ImportError:  # without xdist nothing here is called
    LoadGroupScheduling = object  # type: ignore[assignment,misc]


class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc,valid-type]
    """LoadGroupScheduling whose scopes come from the workers' group files."""

    def __init__(self, config: pytest.Config, log=None, *, directory: Path) -> None:
        super().__init__(config, log)
        self.directory = directory
        self.groups: dict[str, str] | None = None

    def _assign_work_unit(self, node) -> None:
        """LoadScopeScheduling's, but sending every item of a node id: the scheduler keys its work by node id,
        and schemathesis gives all the API operations of one test the test's node id (test_api_fuzz.py), so
        the base class ran the first operation only and counted the rest as never collected."""
        scope, work_unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        pending = {nodeid for nodeid, completed in work_unit.items() if not completed}
        node.send_runtest_some([i for i, nodeid in enumerate(self.registered_collections[node]) if nodeid in pending])

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            self.groups = {}
            for path in sorted(self.directory.glob("*.json")):
                self.groups.update(json.loads(path.read_text()))
        return self.groups.get(nodeid) or super()._split_scope(nodeid)


def record(config: pytest.Config, groups: dict[str, str]) -> None:
    """On a worker, write this worker's ``{nodeid: group}`` where the controller's scheduler reads it."""
    directory = getattr(config, "workerinput", {}).get(KEY)
    if directory is None:
        return
    worker = config.workerinput.get("workerid", "gw")
    part = Path(directory) / f"{worker}.part"
    part.write_text(json.dumps(groups))
    os.replace(part, Path(directory) / f"{worker}.json")


def pytest_configure(config: pytest.Config) -> None:
    if config.getvalue("dist") == "loadgroup" and not hasattr(config, "workerinput"):
        config.stash[_DIRECTORY] = Path(tempfile.mkdtemp(prefix="alertd-xdist-groups-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_DIRECTORY, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    directory = node.config.stash.get(_DIRECTORY, None)
    if directory is not None:
        node.workerinput[KEY] = str(directory)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    directory = config.stash.get(_DIRECTORY, None)
    return None if directory is None else GroupScheduling(config, log, directory=directory)

