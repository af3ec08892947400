"""Shared fixtures: throwaway local etcd clusters, an output directory, and the small suite's runs."""

from __future__ import annotations

# Tests import Locust's modules (shapes, options, the recorder), whose import patches the process with gevent.
# Patch once, first, so that subprocess and threading are never used in both their patched and original forms.
import locust  # noqa: F401

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _import_grpc_without_fork_support() -> None:
    """gevent's subprocess forks in Python, which runs gRPC's fork handlers: with fork support on, a child of a
    process that has used gRPC (the tests' etcd3 clients) restarts gRPC's pollers, closes their fds before exec and
    aborts (SIGABRT, "epoll_wait error: Bad file descriptor") in about one spawn in five: etcd members and Locust runs
    die at start. gRPC reads the variable once, at import; the children keep the environment they had.
    """
    before = os.environ.get("GRPC_ENABLE_FORK_SUPPORT")
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
    try:
        import grpc  # noqa: F401
    finally:
        if before is None:
            del os.environ["GRPC_ENABLE_FORK_SUPPORT"]
        else:
            os.environ["GRPC_ENABLE_FORK_SUPPORT"] = before


_import_grpc_without_fork_support()  # before any test module imports grpc


def _keep_the_hub_alive_in_an_xdist_worker() -> None:
    """pytest-xdist's worker waits for its next test on an Event that its receiving thread (a native thread, started
    before Locust's import patched threading) sets; the Event, made after the patch, is gevent's, and a hub with
    nothing else to wait for gives up on it at once (LoopExit: "This operation would block forever"). A greenlet that
    only sleeps keeps the hub waiting until the other thread wakes it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import gevent

    def sleep_forever() -> None:
        while True:
            gevent.sleep(60)

    gevent.spawn(sleep_forever)


_keep_the_hub_alive_in_an_xdist_worker()

from support import REPO, SMALL_SUITE  # noqa: E402

from etcd_users.local import ClusterError, LocalCluster  # noqa: E402

# In parallel runs (pytest-xdist's -n, see README.md) every end-to-end module is one unit of work, run whole and in
# its order by one worker, with that worker's own etcd1/etcd3; modules that share a session fixture that is costly to
# make are one unit, so that it is made once. The unit tests stay single tests, spread over the workers.
SHARED_UNITS = {"test_suite.py": "small_suite", "test_analysis_suite.py": "small_suite"}
# The longest units, longest first (seconds of a serial run of tests/e2e on 2 busy cores): a worker that took one of
# them late would end the run alone, so they are handed out first; the rest follow in file order, then the unit tests.
LONGEST_UNITS = (
    "test_docs_commands.py",  # 440 s
    "test_audit.py",  # 140 s (quiet)
    "test_faults.py",  # 110 s
    "test_tail.py",  # 90 s
    "test_prometheus.py",  # 85 s
    "test_peer_network.py",  # 85 s (quiet)
    "test_live_levels.py",  # 80 s
    "test_security.py",  # 80 s
    "test_users.py",  # 70 s
    "test_safety.py",  # 65 s
    "test_disruptions.py",  # 60 s
    "test_kubernetes.py",  # 60 s
    "test_space.py",  # 50 s
    "small_suite",  # 50 s
    "test_reads.py",  # 50 s (quiet)
    "test_disrupt_upgrade.py",  # 50 s (quiet)
    "test_disrupt_membership.py",  # 50 s
)


def unit_of_work(nodeid: str) -> str:
    """The unit a test runs in: its end-to-end module (or SHARED_UNITS' name), or the unit test alone."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/e2e/"):
        return nodeid
    name = path.rsplit("/", 1)[-1]
    return SHARED_UNITS.get(name, name)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scheduling by scope (--no-loadscope-reorder keeps the order below), the scopes being unit_of_work's."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitsOfWork(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    return UnitsOfWork(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the order of a serial run stays the files' order
        return

    def rank(item: pytest.Item) -> int:
        unit = unit_of_work(item.nodeid)
        if unit == item.nodeid:  # a unit test
            return len(LONGEST_UNITS) + 1
        return LONGEST_UNITS.index(unit) if unit in LONGEST_UNITS else len(LONGEST_UNITS)

    items.sort(key=rank)  # stable: each module keeps its own order


@contextmanager
def started_cluster(members: int, **options) -> Iterator[LocalCluster]:
    """A started cluster (``options``: LocalCluster's), stopped afterwards; a missing etcd fails the test instead of
    skipping it."""
    cluster = LocalCluster(members, **options)
    failure = None
    try:
        cluster.start(timeout=30)
    except ClusterError as error:
        failure = str(error)
    if failure is not None:  # outside the except block, so the report shows the message only once
        pytest.fail(failure, pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def etcd1() -> Iterator[LocalCluster]:
    """A 1-member cluster shared by the whole session: do not expect it to be empty."""
    with started_cluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def etcd3() -> Iterator[LocalCluster]:
    """A 3-member cluster shared by the whole session: do not kill or pause its members."""
    with started_cluster(3) as cluster:
        yield cluster


@pytest.fixture
def fresh_etcd1() -> Iterator[LocalCluster]:
    """A 1-member cluster of its own, empty at the start of the test."""
    with started_cluster(1) as cluster:
        yield cluster


@pytest.fixture
def fresh_etcd3() -> Iterator[LocalCluster]:
    """A 3-member cluster of its own: the test may change its members."""
    with started_cluster(3) as cluster:
        yield cluster


@pytest.fixture
def uncompacted_etcd1() -> Iterator[LocalCluster]:
    """A 1-member cluster of its own without auto-compaction: its whole history stays readable."""
    with started_cluster(1, auto_compaction_retention=None) as cluster:
        yield cluster


@pytest.fixture
def tmp_out(tmp_path: Path) -> Path:
    """An existing, empty directory for a test's output files."""
    out = tmp_path / "out"
    out.mkdir()
    return out


@pytest.fixture(scope="session")
def small_suite(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """tests/fixtures/suites/small.yaml run once for the session (8 real runs, each on a local etcd of its own): its
    output directory and the runner's result. The suite's tests and its analysis' tests read the same runs; a test
    may add files (a rerun, an analysis) but must not remove any."""
    out = tmp_path_factory.mktemp("small-suite") / "out"
    result = subprocess.run(
        [sys.executable, "-m", "etcd_users.suite", "run", str(SMALL_SUITE), "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return out, result
