"""Helpers shared by the tests: running Locust as a subprocess, free ports, etcd counters, CSV rows, deploy/ manifests.

What a run's output is checked with (its rows, failure labels, refusal line, latency log) is ``checks``.
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.local import ClusterError, LocalCluster

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
# users 2/4 × user_class EtcdPutUser/SerializableRangeUser, 2 repeats: 8 runs of 2 s (run once: the small_suite fixture)
SMALL_SUITE = REPO / "tests" / "fixtures" / "suites" / "small.yaml"
HEADLESS = ("-f", "locustfile.py", "--headless", "--only-summary")
OUTPUT_TAIL_CHARS = 4000


def run_analysis(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m analysis *args`` from the repository, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "analysis", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def run_locust(
    *args: str,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    cwd: Path | str = REPO,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m locust *args` to completion; stdout and stderr are captured separately as text.

    On timeout the whole process group (Locust may fork workers) is killed and AssertionError is raised
    with the tail of the output.
    """
    command = [sys.executable, "-m", "locust", *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"locust did not finish within {timeout:g}s: {' '.join(args)}\n{_tails(stdout, stderr)}"
        ) from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


class LocustProcess(subprocess.Popen):
    """A Locust process started in the background whose output goes to files (a pipe nobody reads could block it)."""

    stdout_path: Path
    stderr_path: Path

    def output(self) -> tuple[str, str]:
        """Everything written so far to stdout and stderr."""
        return (
            self.stdout_path.read_text(errors="replace"),
            self.stderr_path.read_text(errors="replace"),
        )

    def finish(self, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Wait for the process to exit; on timeout kill its process group and raise AssertionError."""
        try:
            self.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise AssertionError(f"locust did not exit within {timeout:g}s\n{_tails(*self.output())}") from None
        return subprocess.CompletedProcess(self.args, self.returncode, *self.output())

    def interrupt(self) -> None:
        """Ask Locust to stop the way Ctrl-C would."""
        if self.poll() is None:
            self.send_signal(signal.SIGINT)

    def kill_group(self) -> None:
        """SIGKILL the process and any workers it forked."""
        kill_group(self)

    def __exit__(self, *exc_info: object) -> None:
        # Never leave a Locust behind when a test fails half-way.
        self.kill_group()
        super().__exit__(*exc_info)


def start_locust(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str = REPO,
    log_dir: Path | str | None = None,
) -> LocustProcess:
    """Start `python -m locust *args` in the background (use as a context manager, or call finish/kill_group)."""
    log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="locust-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    stem = f"locust-{len(list(log_dir.glob('locust-*.stdout')))}"
    stdout_path, stderr_path = log_dir / f"{stem}.stdout", log_dir / f"{stem}.stderr"
    with open(stdout_path, "w") as stdout, open(stderr_path, "w") as stderr:
        process = LocustProcess(
            [sys.executable, "-m", "locust", *args],
            cwd=cwd,
            env=_environment(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    process.stdout_path, process.stderr_path = stdout_path, stderr_path
    return process


def headless_args(
    cluster: LocalCluster, csv_prefix: Path | str, *args: str, users: int = 4, seconds: int = 2
) -> list[str]:
    """A headless run of ``users`` users for ``seconds`` against ``cluster``, its CSV files at ``csv_prefix``."""
    timing = ("-u", str(users), "-r", str(users), "-t", f"{seconds}s")
    return [*HEADLESS, *timing, "--csv", str(csv_prefix), "--etcd-endpoints", ",".join(cluster.endpoints), *args]


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """Bad input: exit 2, nothing on stdout, one line on stderr holding every fragment, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def member_counter(cluster: LocalCluster, method: str) -> list[float]:
    """Per member, the sum of `grpc_server_handled_total{grpc_method=method}` over all codes."""
    return [
        metric_sum(fetch_metrics(url), "grpc_server_handled_total", grpc_method=method) for url in cluster.metrics_urls
    ]


@contextmanager
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """``cluster`` started (a start that fails fails the test in one line) and stopped after the block."""
    try:
        cluster.start(timeout=30)
    except ClusterError as error:
        cluster.stop()
        pytest.fail(str(error), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


# Ports the kernel hands out itself (bind to 0, a client's outgoing connection, the members a LocalCluster starts) come
# from its ephemeral range, so a port probed there can be taken before the test binds it. The tests' own ports come from
# below that range, a block per xdist worker, in turn, so no two tests and no outgoing connection share one.
_TEST_PORTS_START, _TEST_PORTS_PER_WORKER, _TEST_PORT_BLOCKS = 12000, 2500, 8
_next_test_port: list[int] = []


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (for a web UI, a master, or a dead member's URL)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % _TEST_PORT_BLOCKS
    first = _TEST_PORTS_START + worker * _TEST_PORTS_PER_WORKER
    if not _next_test_port:
        _next_test_port.append(first + os.getpid() % _TEST_PORTS_PER_WORKER)
    for _ in range(_TEST_PORTS_PER_WORKER):
        port = first + (_next_test_port[0] - first) % _TEST_PORTS_PER_WORKER
        _next_test_port[0] = port + 1
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))  # without SO_REUSEADDR: a port still in TIME_WAIT is passed over too
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in 127.0.0.1:{first}-{first + _TEST_PORTS_PER_WORKER - 1}")


def read_csv_rows(path: Path | str) -> list[dict[str, str]]:
    """All rows of a CSV file with a header line."""
    with open(path, newline="") as csv_file:
        return list(csv.DictReader(csv_file))


def deploy_manifests() -> dict[tuple[str, str], dict]:
    """Every Kubernetes object of deploy/*.yaml, by (kind, name); kinds may repeat a name (the master Job)."""
    documents: dict[tuple[str, str], dict] = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":  # kustomize's file, no object
            continue
        for document in yaml.safe_load_all(path.read_text()):
            assert document["apiVersion"] and document["kind"], path
            key = (document["kind"], document["metadata"]["name"])
            assert key not in documents, f"{path.name}: {key} defined twice"
            documents[key] = document
    return documents


def pod_container(workload: dict) -> dict:
    """The one container of a Deployment's or Job's pods."""
    [only] = workload["spec"]["template"]["spec"]["containers"]
    return only


def pod_environment(manifests: dict[tuple[str, str], dict], kind: str, name: str) -> dict[str, str]:
    """What the pod's container sees: the ConfigMap, then its own plain values (Kubernetes' order)."""
    environment = dict(manifests[("ConfigMap", "locust-etcd-options")]["data"])
    for entry in pod_container(manifests[(kind, name)]).get("env", []):
        if "value" in entry:
            environment[entry["name"]] = entry["value"]
    return environment


def _environment(overrides: Mapping[str, str] | None) -> dict[str, str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # the tests' runs write no tables into the summary of a GitHub Actions job that runs the tests, unless asked
    environment.pop("GITHUB_STEP_SUMMARY", None)
    environment.update(overrides or {})
    return environment


def kill_group(process: subprocess.Popen) -> None:
    # The group outlives its leader when forked workers are left behind, so kill it even after the leader exited.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _tails(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    def tail(text: str | bytes | None) -> str:
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        return (text or "")[-OUTPUT_TAIL_CHARS:]

    return f"--- stdout (tail) ---\n{tail(stdout)}\n--- stderr (tail) ---\n{tail(stderr)}"
