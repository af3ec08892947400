"""Scale: a worker lost mid-run is news, a run whose connections cannot fit in a process is refused, and thousands of
users spawned at once run without warning storms and are counted exactly."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from xml.etree import ElementTree

import pytest
from checks import assert_no_traceback, refusal_line
from support import REPO, free_port, headless_args, read_csv_rows, run_locust, start_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _wait_for(process, texts: tuple[str, ...], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stderr = process.output()[1]
        if any(text in stderr for text in texts):
            return stderr
        assert process.poll() is None, stderr[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"none of {texts!r} within {timeout:g}s\n{process.output()[1][-3000:]}")


def test_a_worker_killed_mid_run_is_a_warning_a_summary_record_and_a_failed_verdict(etcd1, tmp_out):
    port = free_port()
    prefix, junit = tmp_out / "run", tmp_out / "junit.xml"
    master_args = [
        "-f", "locustfile.py", "--headless", "--only-summary", "-u", "8", "-r", "8", "-t", "120s",
        "--csv", str(prefix), "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/test-lost-worker/",
        "--etcd-cleanup", "--etcd-user-rate", "2", "--etcd-sla", "errors<100%", "--etcd-junit", str(junit),
        "--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
        "EtcdPutUser",
    ]  # fmt: skip
    worker_args = ["-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    # the master logs "All users spawned" once both workers have reported their users, however long that takes on a
    # loaded machine: a worker killed before its report would take no known users with it
    master_env = {"LOCUST_WAIT_FOR_WORKERS_REPORT_AFTER_RAMP_UP": "90"}
    with start_locust(*master_args, env=master_env, log_dir=tmp_out) as master:
        with start_locust(*worker_args, log_dir=tmp_out) as kept, start_locust(*worker_args, log_dir=tmp_out) as lost:
            _wait_for(master, ("All users spawned",), timeout=90)
            time.sleep(1)
            lost.kill_group()  # SIGKILL: no goodbye to the master
            _wait_for(master, (" lost at ",), timeout=60)
            master.interrupt()  # the run's time is only a bound
            finished = master.finish(timeout=90)
            kept.finish(timeout=30)
    output = finished.stderr
    assert_no_traceback(output)
    assert finished.returncode == 3, output[-3000:]

    # the warning at once: which worker, and what went with it (4 of the 8 users, 8 of the 16 req/s)
    warning = re.search(r"WARNING/\S+: worker (\S+) lost at (\d+) s \(no heartbeat for \d+ s\): (.*)", output)
    assert warning, output[-3000:]
    worker, at_s = warning.group(1), int(warning.group(2))
    assert warning.group(3) == (
        "its load (4 of 8 users, 8 req/s of 16 req/s) went with it; the run goes on without it and is not the run "
        "planned"
    )

    # the summary's record of it
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    [record] = summary["lost_workers"]
    assert (record["worker"], record["users"], record["run_users"], record["returned_at"]) == (worker, 4, 8, None)
    assert round(record["at_s"]) == at_s and 0 <= record["at_s"] <= 120

    # the verdict: printed with the gates, in the JUnit report and the summary's gates, exit code 3
    verdict = f"1 of 2 lost at {at_s} s (4 users, 8 req/s): the run was not the run planned"
    assert f"SLA workers: {verdict} FAIL" in output.splitlines()
    assert re.search(r"SLA Aggregated errors < 100%: .* PASS", output)
    cases = {case.get("name"): case for case in ElementTree.parse(junit).iter("testcase")}
    assert cases["workers"].find("failure") is not None
    assert verdict in cases["workers"].find("failure").get("message")
    assert {"gate": "workers", "value": 1.0, "passed": False} in summary["gates"]


def test_connections_beyond_the_open_file_limit_are_refused_in_one_line(etcd1, tmp_out):
    def low_limit() -> None:  # Locust's own minimum, 10,000: below it Locust warns on lines of its own
        resource.setrlimit(resource.RLIMIT_NOFILE, (10_000, 10_000))

    args = headless_args(etcd1, tmp_out / "run", "--etcd-conns", "12000", "EtcdPutUser", users=1, seconds=1)
    result = subprocess.run(
        [sys.executable, "-m", "locust", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=low_limit,
    )
    assert refusal_line(result) == (
        "locust-etcd: error: --etcd-conns: 12000 connections per process (--etcd-conns 12000 × 1 endpoint) do not fit "
        "in its open-file limit of 10000 less 128 for its other files; spread them over 2 processes with --etcd-conns "
        "6000 each (--processes 2, or 2 workers), or raise the hard limit (ulimit -Hn)"
    )


def test_the_soft_open_file_limit_is_raised_to_the_hard_one():
    def lower_soft() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 512))

    code = "from etcd_users.open_files import raise_limit; import resource; raise_limit(); "
    code += "print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30, preexec_fn=lower_soft
    )
    assert result.stdout.split() == ["512", "512"], result.stderr


def test_three_thousand_users_spawned_at_once_run_quietly_and_are_counted_exactly(etcd1, tmp_out):
    prefix = tmp_out / "run"
    args = ("--etcd-prefix", "/test-scale/", "--etcd-cleanup", "--etcd-conns", "300", "--etcd-user-rate", "0.2")
    result = run_locust(*headless_args(etcd1, prefix, *args, "EtcdPutUser", users=3000, seconds=8), timeout=120)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode == 0, output[-3000:]
    assert 'All users spawned: {"EtcdPutUser": 3000} (3000 total users)' in output
    # no storm: each warning or error says its thing once
    said = Counter(
        re.sub(r"^\[[^]]*\] \S+/", "", line) for line in output.splitlines() if "/WARNING/" in line or "/ERROR/" in line
    )
    assert all(count == 1 for count in said.values()), said.most_common(3)
    # every request in Locust's count, the exact latency file and etcd's own (the audit's acknowledged writes)
    stats = {row["Name"]: row for row in read_csv_rows(f"{prefix}_stats.csv")}
    exact = {row["Name"]: row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Series"] == "service"}
    requests = int(stats["put"]["Request Count"])
    assert requests > 0 and int(stats["put"]["Failure Count"]) == 0
    assert int(exact["put"]["Count"]) == requests
    assert f"{requests:,} acknowledged writes, 0 lost" in output
