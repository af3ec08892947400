"""Is it etcd or the load generator? Real headless Locust runs: every process's CPU per second in
``PREFIX_client_cpu.csv`` (a master and two workers against a real etcd), and a run whose users burn their process's
CPU, flagged client-bound level by level with the advice to add processes."""

from __future__ import annotations

import json
import re

import pytest
from checks import assert_no_traceback
from support import free_port, read_csv_rows, run_analysis, run_locust, start_locust

from etcd_users.analysis.client import ADVICE, CLIENT_BOUND_PCT
from etcd_users.files import CLIENT_CPU_COLUMNS, LOCAL_PROCESS, MASTER_PROCESS

pytestmark = pytest.mark.e2e

SECONDS = 8  # long enough for a few samples a process: the checks below scale with it


@pytest.mark.slow
def test_a_master_and_two_workers_write_each_processs_cpu_per_second(etcd1, tmp_out):
    port = free_port()
    prefix = tmp_out / "run"
    master_args = [
        "-f", "locustfile.py", "--headless", "--only-summary", "-u", "8", "-r", "8", "-t", f"{SECONDS}s",
        "--csv", str(prefix), "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/client-cpu-e2e/",
        "--etcd-cleanup", "--etcd-user-rate", "20",
        "--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
        "EtcdPutUser",
    ]  # fmt: skip
    worker_args = ["-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    with start_locust(*master_args, log_dir=tmp_out) as master:
        with (
            start_locust(*worker_args, log_dir=tmp_out) as first,
            start_locust(*worker_args, log_dir=tmp_out) as second,
        ):
            finished = master.finish(timeout=90)
            workers = [worker.finish(timeout=30) for worker in (first, second)]
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert_no_traceback(finished.stderr)
    for worker in workers:
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert_no_traceback(worker.stderr)
    worker_ids = set(re.findall(r"(\S+) \(index \d+\) reported as ready", finished.stderr))
    assert len(worker_ids) == 2, finished.stderr[-3000:]

    rows = read_csv_rows(f"{prefix}_client_cpu.csv")
    assert rows and list(rows[0]) == list(CLIENT_CPU_COLUMNS)
    by_process: dict[str, list[dict]] = {}
    for row in rows:
        by_process.setdefault(row["Process"], []).append(row)
    assert set(by_process) == worker_ids | {MASTER_PROCESS}
    latency = read_csv_rows(f"{prefix}_latency.csv")
    first_request = min(float(row["First"]) for row in latency if row["First"])
    last_request = max(float(row["Last"]) for row in latency if row["Last"])
    for process, samples in by_process.items():
        seconds = [int(row["Timestamp"]) for row in samples]
        # one sample a second, each second once, over the run (the first and last seconds may be missing, and a busy
        # machine may delay the sampler past a second now and then: half of them is a bound only a stuck sampler fails)
        assert len(seconds) == len(set(seconds)) >= SECONDS / 2, (process, seconds)
        assert first_request - 3 <= min(seconds) and max(seconds) <= last_request + 3, (process, seconds)
        for row in samples:
            # 20 puts/s per user is light work, far from a core on any machine that runs etcd; the wait is never
            # negative
            assert 0.0 <= float(row["CpuPct"]) < CLIENT_BOUND_PCT, (process, row)
            assert row["WaitPct"] == "" or 0.0 <= float(row["WaitPct"]) <= 100.0, (process, row)
        print(process, [row["CpuPct"] for row in samples])
    # the workers ran the users: each used some CPU over the run (how much depends on the machine's speed)
    mean = {process: sum(float(row["CpuPct"]) for row in rows) / len(rows) for process, rows in by_process.items()}
    assert all(mean[worker] > 0 for worker in worker_ids), mean

    analysis = run_analysis(prefix)
    assert analysis.returncode == 0, analysis.stderr
    assert "client CPU (%)" in analysis.stdout.splitlines()[0]
    assert f"{prefix.name}: client CPU from run_client_cpu.csv: 3 processes" in analysis.stdout
    assert ADVICE not in analysis.stdout


def test_users_that_burn_their_process_make_their_level_client_bound_with_the_advice(tmp_out):
    prefix = tmp_out / "busy"
    result = run_locust(
        "-f", "tests/locustfiles/busy_client.py,shapes/ladder.py", "--headless", "--only-summary",
        "--shape-ladder", "1,2", "--shape-step-time", "5", "--csv", str(prefix),
        env={"BUSY_CLIENT_FROM_USERS": "2"},  # one user is quiet, two spin
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stderr)
    assert {row["Process"] for row in read_csv_rows(f"{prefix}_client_cpu.csv")} == {LOCAL_PROCESS}

    out = tmp_out / "report"
    analysis = run_analysis(prefix, "--sla", "busy:p99<100ms", "--out", out)
    assert analysis.returncode == 0, analysis.stderr
    assert analysis.stdout.splitlines()[-1] == ADVICE
    document = json.loads((out / "levels.json").read_text())
    rows = {row["level"]: row for row in document["runs"][0]["levels"]}
    quiet, busy = rows["ladder 1"], rows["ladder 2"]
    print(f"quiet {quiet['client_cpu_pct']:.1f} %, busy {busy['client_cpu_pct']:.1f} %")
    # quiet: not client-bound by the analysis' own rule, and less CPU than the spinning level of the same run
    assert quiet["bound"] == "" and quiet["verdict"] == "pass", quiet
    assert quiet["client_cpu_pct"] < busy["client_cpu_pct"], (quiet, busy)
    # busy: the CPU it got plus what it waited for reach a core, whatever the rest of the machine does
    assert busy["bound"] == "client" and busy["verdict"] == "pass (client-bound)", busy
    assert document["client_bound_levels"] == ["ladder 2"]
    assert "(client-bound: a figure of the load generator, not etcd)" in document["summary"]


def test_a_run_whose_client_burns_its_core_says_at_its_end_that_the_client_was_the_limit(tmp_out):
    prefix = tmp_out / "busy"
    result = run_locust(
        "-f", "tests/locustfiles/busy_client.py", "--headless", "--only-summary", "-u", "2", "-r", "2", "-t", "6s",
        "--csv", str(prefix), timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "the client was the limit" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "its busiest process wanted " in lines[0] and "give --processes N" in lines[0], lines[0]


def test_a_quiet_client_says_nothing_of_being_the_limit(tmp_out):
    result = run_locust(
        "-f", "tests/locustfiles/busy_client.py", "--headless", "--only-summary", "-u", "1", "-r", "1", "-t", "5s",
        "--csv", str(tmp_out / "quiet"), env={"BUSY_CLIENT_FROM_USERS": "2"}, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the client was the limit" not in result.stderr
