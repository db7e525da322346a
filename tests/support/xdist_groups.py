"""``--dist loadgroup`` that keeps working when xdist cannot: the groups reach the scheduler in a file.

pytest-xdist's loadgroup passes a test's ``xdist_group`` to its scheduler by appending ``@group`` to the
node id on the worker; pytest 9.2 builds node ids from a structured id that this no longer changes, so
the groups are silently dropped and every worker starts every service (pytest-xdist issue #1386). Here
the controller gives each worker a file name (``workerinput``), each worker writes ``{nodeid: group}``
for the tests it collected (``record``) before it reports its collection, and the scheduler, which only
runs once every worker has reported, reads the map. An ``@group`` suffix, should xdist add it again,
still counts.

``RunAll`` checks the other side of the same risk: every collected test ran. The controller counts the node ids
the workers collected and the teardowns it was sent; a run that otherwise passed fails when the two differ,
naming what never ran (a scheduler that drops work reports success with tests missing).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

KEY = "alertd_xdist_groups"
_DIRECTORY = pytest.StashKey[Path]()  # the controller's directory of group files
_RUN_ALL = pytest.StashKey["RunAll"]()

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



class RunAll:
    """On the controller: what one worker collected, against the teardowns every worker reported."""

    def __init__(self) -> None:
        self.collected: Counter[str] | None = None
        self.finished: Counter[str] = Counter()

    def missing(self) -> Counter[str]:
        """How many times each node id was collected and not run (one id can name several items)."""
        return (self.collected or Counter()) - self.finished


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    run_all = node.config.stash.setdefault(_RUN_ALL, RunAll())
    if run_all.collected is None:  # every worker collects the same tests
        run_all.collected = Counter(ids)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown" and getattr(report, "node", None) is not None:  # sent by a worker
        run_all = report.node.config.stash.setdefault(_RUN_ALL, RunAll())
        run_all.finished[report.nodeid] += 1


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run_all = session.config.stash.get(_RUN_ALL, None)
    if run_all is None or exitstatus != pytest.ExitCode.OK or session.shouldstop or session.shouldfail:
        return
    if missing := run_all.missing():
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        named = ", ".join(f"{nodeid} ({count})" for nodeid, count in sorted(missing.items())[:5])
        if reporter is not None:
            reporter.write_sep("=", f"{sum(missing.values())} collected test(s) never ran: {named}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
