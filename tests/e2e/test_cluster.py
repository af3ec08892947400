"""The local etcd launcher (etcd_users.local) against real etcd processes, and the members' /metrics. Finding the
binary and the Prometheus text parser are ``tests/unit/test_cluster.py``."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import etcd3
import gevent
import pytest
from checks import stderr_lines
from support import REPO, member_counter

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.local import cluster as cluster_module

pytestmark = pytest.mark.e2e

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_health(endpoint: str, timeout: float = 5) -> dict:
    with _DIRECT.open(f"{endpoint}/health", timeout=timeout) as response:
        return json.loads(response.read())


def answers(endpoint: str) -> bool:
    try:
        get_health(endpoint, timeout=1)
    except (urllib.error.URLError, OSError):
        return False
    return True


@contextmanager
def kv_client(endpoint: str) -> Iterator[etcd3.Etcd3Client]:
    address = urllib.parse.urlsplit(endpoint)
    client = etcd3.client(address.hostname, address.port, timeout=10)
    try:
        yield client
    finally:
        client.close()


def is_etcd_process(pid: int) -> bool:
    try:
        return b"etcd" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def wait_until(condition, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(message)
        time.sleep(0.1)


# -- a single member ---------------------------------------------------------------------------------------


def test_single_member_is_healthy_and_stores_keys(etcd1):
    [endpoint] = etcd1.endpoints
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", endpoint)
    assert get_health(endpoint)["health"] == "true"
    with kv_client(endpoint) as client:
        client.put("/test-cluster/single", "value-1")
        value, _ = client.get("/test-cluster/single")
    assert value == b"value-1"
    assert etcd1.log_path(0).is_file()
    assert etcd1.metrics_urls == [f"{endpoint}/metrics"]


def test_member_metrics_show_a_leader_and_count_puts(etcd1):
    samples = fetch_metrics(etcd1.metrics_urls[0])
    assert metric_sum(samples, "etcd_server_has_leader") == 1
    assert metric_sum(samples, "etcd_server_is_leader") == 1
    [puts_before] = member_counter(etcd1, "Put")
    with kv_client(etcd1.endpoints[0]) as client:
        for number in range(3):
            client.put(f"/test-cluster/counted-{number}", "x")
    [puts_after] = member_counter(etcd1, "Put")
    assert puts_after - puts_before == 3


def test_failed_start_reports_the_reason_and_cleans_up():
    cluster = LocalCluster(1, extra_args=["--no-such-flag"])
    with pytest.raises(ClusterError) as raised:
        cluster.start(timeout=10)
    first_line = str(raised.value).splitlines()[0]
    assert "exited with code" in first_line
    assert "flag provided but not defined: -no-such-flag" in first_line
    log_path = Path(re.search(r"\(log: (\S+)\)", first_line).group(1))
    assert not log_path.parent.exists()


def test_a_raced_port_is_retried_with_new_ports(monkeypatch):
    with closing(socket.socket()) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy_port = squatter.getsockname()[1]
        real_free_ports = cluster_module.free_ports
        calls = []

        def first_call_hands_out_a_busy_port(count: int) -> list[int]:
            calls.append(count)
            ports = real_free_ports(count)
            return [busy_port, *ports[1:]] if len(calls) == 1 else ports

        monkeypatch.setattr(cluster_module, "free_ports", first_call_hands_out_a_busy_port)
        with LocalCluster(1) as cluster:
            assert len(calls) == 2
            assert not cluster.endpoints[0].endswith(f":{busy_port}")
            assert get_health(cluster.endpoints[0])["health"] == "true"


def test_a_kept_data_dir_restarts_with_its_data_and_ports(tmp_path):
    data_dir = tmp_path / "etcd-data"
    with LocalCluster(1, data_dir=str(data_dir)) as cluster:
        endpoints = cluster.endpoints
        with kv_client(endpoints[0]) as client:
            client.put("/test-cluster/kept", "survives")
    assert (data_dir / "member0").is_dir()
    assert (data_dir / cluster_module.PORTS_FILE).is_file()
    with LocalCluster(1, data_dir=str(data_dir)) as cluster:
        assert cluster.endpoints == endpoints
        with kv_client(endpoints[0]) as client:
            value, _ = client.get("/test-cluster/kept")
    assert value == b"survives"


# -- three members -----------------------------------------------------------------------------------------


def test_three_members_elect_exactly_one_leader_and_replicate(etcd3):
    assert len(etcd3.endpoints) == 3 and len(set(etcd3.endpoints)) == 3
    leader = etcd3.leader_index()
    leader_flags = [metric_sum(fetch_metrics(url), "etcd_server_is_leader") for url in etcd3.metrics_urls]
    assert leader_flags == [1.0 if index == leader else 0.0 for index in range(3)]
    with kv_client(etcd3.endpoints[0]) as writer:
        writer.put("/test-cluster/replicated", "everywhere")
    with kv_client(etcd3.endpoints[2]) as reader:
        value, _ = reader.get("/test-cluster/replicated")
    assert value == b"everywhere"


@pytest.mark.slow
def test_failover_restart_pause_and_clean_stop():
    cluster = LocalCluster(3, name="failover")
    cluster.start(timeout=30)
    try:
        old_leader = cluster.leader_index()
        cluster.kill_member(old_leader)
        assert cluster.pids[old_leader] is None
        new_leader = cluster.leader_index(timeout=15)
        assert new_leader != old_leader

        cluster.start_member(old_leader, timeout=20)
        assert get_health(cluster.endpoints[old_leader])["health"] == "true"
        assert cluster.leader_index() in range(3)

        follower = next(index for index in range(3) if index != cluster.leader_index())
        cluster.pause_member(follower)
        assert not answers(cluster.endpoints[follower])
        cluster.resume_member(follower)
        wait_until(lambda: answers(cluster.endpoints[follower]), 10, "resumed member does not answer")

        cluster.stop_member(follower)
        assert cluster.pids[follower] is None
        cluster.start_member(follower, timeout=20)

        pids = cluster.pids
        data_dir = cluster.data_dir
        assert all(pid is not None and is_etcd_process(pid) for pid in pids)
    finally:
        cluster.stop()
    assert not data_dir.exists()
    assert not any(is_etcd_process(pid) for pid in pids)


def etcd_processes_on(data_dir: Path) -> set[int]:
    """The etcd processes whose command line names ``data_dir``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and str(data_dir).encode() in arguments and is_etcd_process(int(entry.name)):
            found.add(int(entry.name))
    return found


@pytest.mark.parametrize("switches", [1, 2, 3])
def test_a_start_whose_greenlet_is_killed_leaves_no_etcd_the_cluster_does_not_know(switches):
    # a run that stops while a disruption starts a member kills the disruption's greenlet wherever it is
    cluster = LocalCluster(1, name="killed-start")
    cluster.start(timeout=30)
    try:
        data_dir = cluster.data_dir / "member0"
        cluster.kill_member(0)
        starting = gevent.spawn(cluster.start_member, 0, 20)
        for _ in range(switches):  # the kill lands at the start's first, second or third wait
            gevent.sleep(0)
        starting.kill(block=True)
        if cluster.pids[0] is None:  # not started at all: it starts now, on its ports (an etcd it lost holds them)
            cluster.start_member(0, timeout=20)
        wait_until(lambda: answers(cluster.endpoints[0]), 20, "the member does not answer")
        assert etcd_processes_on(data_dir) == {cluster.pids[0]}
    finally:
        cluster.stop()


# -- python -m etcd_users.local ----------------------------------------------------------------------------


@contextmanager
def standalone_cluster(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """Run the command line in the background; yield it with the endpoints it printed."""
    stdout_path, stderr_path = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout_path, "w") as stdout, open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "etcd_users.local", *args], cwd=REPO, stdout=stdout, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 40
        while not (match := re.search(r"^LOCUST_ETCD_ENDPOINTS=(\S+)$", stdout_path.read_text(), re.MULTILINE)):
            output = f"stdout: {stdout_path.read_text()}\nstderr: {stderr_path.read_text()}"
            assert process.poll() is None, f"exited early with {process.returncode}\n{output}"
            assert time.monotonic() < deadline, f"no LOCUST_ETCD_ENDPOINTS line\n{output}"
            time.sleep(0.1)
        yield process, match.group(1).split(",")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_command_line_prints_endpoints_and_stops_on_ctrl_c(tmp_path):
    with standalone_cluster(tmp_path, "--members", "3") as (process, endpoints):
        assert len(endpoints) == 3
        assert all(get_health(endpoint)["health"] == "true" for endpoint in endpoints)
        data_dir = Path(re.search(r"data and logs in (\S+);", (tmp_path / "stderr").read_text()).group(1))
        assert data_dir.is_dir()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    assert not data_dir.exists()
    assert not any(answers(endpoint) for endpoint in endpoints)
    [status_line] = stderr_lines((tmp_path / "stderr").read_text())
    assert re.match(r"etcd 3\.\d+\.\d+ \(/\S+/etcd\): 3 member\(s\) healthy in ", status_line), status_line


def test_members_die_with_the_python_process(tmp_path):
    data_dir = tmp_path / "etcd-data"
    with standalone_cluster(tmp_path, "--members", "1", "--data-dir", str(data_dir)) as (process, endpoints):
        process.kill()  # no chance to clean up: only PR_SET_PDEATHSIG stops etcd
        wait_until(lambda: not answers(endpoints[0]), 10, "etcd outlived the Python process that started it")
