"""Distributed runs: a master with two worker processes, and ``--processes 2``, each driven by a load shape.

The master merges the workers' reports: Locust's request count, the exact latency file and the SLA gates must all
describe the same requests, and no worker may go missing on the way.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from checks import assert_no_traceback
from support import free_port, read_csv_rows, run_locust, start_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LADDER = ("-f", "locustfile.py,shapes/ladder.py", "--shape-ladder", "2,4", "--shape-step-time", "3")
# 20 QPS for 2 s, 40 QPS for 2 s, a 60 QPS spike for 2 s (Locust checks the shape once a second), 10 req/s per user
STEP_SPIKE = (
    "-f", "locustfile.py,shapes/step_spike.py",
    "--shape-baseline-qps", "20", "--shape-baseline-time", "2", "--shape-step-qps", "20", "--shape-step-time", "2",
    "--shape-max-qps", "40", "--shape-spike-qps", "60", "--shape-spike-time", "2", "--etcd-user-rate", "10",
)  # fmt: skip
GATES = "put:p99<5s,put:p99.9<10s,errors<1%,qps>1"


def master_args(port: int, prefix: Path, *args: str) -> list[str]:
    return [
        *args, "--headless", "--only-summary", "--csv", str(prefix), "--etcd-sla", GATES,
        "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "EtcdPutUser",
    ]  # fmt: skip


def worker_args(port: int) -> list[str]:
    return ["-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]


def check_merged_run(prefix: Path, master_log: str) -> None:
    """Counts add up across workers, exact percentiles are there, none went missing, gates judged the merged data."""
    assert_no_traceback(master_log)
    assert "missing" not in master_log, master_log[-3000:]
    assert "2 workers connected" in master_log
    stats = {row["Name"]: row for row in read_csv_rows(f"{prefix}_stats.csv")}
    exact = {row["Name"]: row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Series"] == "service"}
    assert set(stats) == set(exact) == {"put", "Aggregated"}
    requests = int(stats["put"]["Request Count"])
    assert requests > 0  # how many is the machine's: the counts below must agree, whatever they are
    assert int(exact["put"]["Count"]) == requests == int(stats["Aggregated"]["Request Count"])
    assert int(stats["put"]["Failure Count"]) == int(exact["put"]["Failures"]) == 0
    put = exact["put"]
    assert 0 < float(put["P50"]) <= float(put["P99"]) <= float(put["P99.9"]) <= float(put["Max"])
    lines = [line for line in master_log.splitlines() if line.startswith("SLA ")]
    assert lines == [
        f"SLA put p99 < 5s: {float(put['P99']) / 1000:.6f}s PASS",
        f"SLA put p99.9 < 10s: {float(put['P99.9']) / 1000:.6f}s PASS",
        f"SLA Aggregated errors < 1%: 0.000% (0 of {requests}) PASS",
        lines[3],
    ]
    assert re.fullmatch(r"SLA Aggregated qps > 1: [0-9.]+/s PASS", lines[3])


def test_master_and_two_workers_run_a_shape_to_its_end(etcd1, tmp_out):
    port = free_port()
    endpoints = ("--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-cleanup")
    args = master_args(port, tmp_out / "run", *LADDER, *endpoints, "--master", "--expect-workers", "2")
    with start_locust(*args, log_dir=tmp_out) as master:
        with (
            start_locust(*worker_args(port), log_dir=tmp_out) as first,
            start_locust(*worker_args(port), log_dir=tmp_out) as second,
        ):
            finished = master.finish(timeout=90)
            workers = [worker.finish(timeout=30) for worker in (first, second)]
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "shape: plan complete at" in finished.stderr
    for worker in workers:
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert_no_traceback(worker.stderr)
    check_merged_run(tmp_out / "run", finished.stderr)


def test_processes_run_a_qps_shape_to_its_end(etcd1, tmp_out):
    port = free_port()
    # the forked workers dial --master-port: both must name the free port
    args = master_args(port, tmp_out / "run", *STEP_SPIKE, "--processes", "2", "--master-port", str(port))
    result = run_locust(*args, "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-cleanup", timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shape: level 3/3 'spike'" in result.stderr
    check_merged_run(tmp_out / "run", result.stderr)


def test_without_endpoints_the_workers_use_the_masters_local_etcd_and_options(tmp_out):
    port = free_port()
    args = [
        "-f", "locustfile.py", "--headless", "--only-summary", "-u", "2", "-r", "2", "-t", "3s",
        "--csv", str(tmp_out / "run"), "--etcd-prefix", "/distributed/", "--etcd-cleanup",
        "--master", "--expect-workers", "1", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
        "EtcdPutUser",
    ]  # fmt: skip
    with start_locust(*args, log_dir=tmp_out) as master:
        with start_locust(*worker_args(port), log_dir=tmp_out) as worker:
            finished = master.finish(timeout=60)
            worker_run = worker.finish(timeout=30)
    assert finished.returncode == 0, finished.stderr[-3000:]
    started = re.search(r"started a local etcd \(1 member, etcd [^)]*\): (http://127\.0\.0\.1:\d+)", finished.stderr)
    assert started, finished.stderr[-3000:]
    assert worker_run.returncode == 0, worker_run.stderr[-3000:]
    assert_no_traceback(worker_run.stderr)
    assert "error" not in worker_run.stderr.lower(), worker_run.stderr[-3000:]
    assert "started a local etcd" not in worker_run.stderr
    stats = {row["Name"]: row for row in read_csv_rows(tmp_out / "run_stats.csv")}
    assert int(stats["put"]["Request Count"]) > 0
    assert int(stats["put"]["Failure Count"]) == 0
    # the worker wrote under the master's --etcd-prefix, not the default one
    deleted = re.search(r"deleted (\d+) keys under '/distributed/'", finished.stderr)
    assert deleted and int(deleted.group(1)) > 0, finished.stderr[-3000:]


def test_a_master_port_another_process_holds_is_refused_before_the_workers_fork(etcd1, tmp_out):
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        args = master_args(port, tmp_out / "run", "-f", "locustfile.py", "--processes", "2", "--master-port", str(port))
        result = run_locust(*args, "-t", "2s", "--etcd-endpoints", ",".join(etcd1.endpoints), timeout=60)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].split(": error: ")[1] == (
        f"argument --master-bind-port: port {port} is in use (another Locust master on this machine?): "
        f"give a free port P as --master-bind-port P --master-port P (the forked workers dial it)"
    )
    assert_no_traceback(result.stderr)
