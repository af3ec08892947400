"""What a run writes before it measures, and how a run ends that measured nothing or did not hold its rate, on real
etcd members and real Locust runs: the read key space written before the clock of -t starts, none of its puts in the
stats or the keys line, a failed fill ending the run with one line and exit code 1, the rate line of --etcd-user-rate.
The pure parts are tests/unit/test_empty_run.py and tests/unit/test_rate_shortfall.py."""

from __future__ import annotations

import json
import re

import pytest
from support import HEADLESS, headless_args, read_csv_rows, run_locust

from etcd_users.local import LocalCluster

pytestmark = pytest.mark.e2e

RATE_LINE = "locust-etcd: the rate was not held: "
EMPTY_LINE = "locust-etcd: no request was measured: "


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_read_run_measures_its_whole_run_time_after_the_key_space_is_written(etcd3, tmp_out):
    args = ("SerializableRangeUser", "--etcd-target", "round-robin", "--etcd-prefix", "/prepared-reads/")
    result = run_locust(*headless_args(etcd3, tmp_out / "run", *args, "--etcd-cleanup", users=16, seconds=6))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    # written before Locust starts the clock of -t, with its time
    filled = result.stderr.index("key space: 10,000 keys of 1024 bytes written under '/prepared-reads/' in ")
    assert filled < result.stderr.index("Run time limit set to 6 seconds")
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    key_space = summary["preparation"]["key_space"]
    assert (key_space["keys"], key_space["written"], key_space["error"]) == (10_000, 10_000, None)
    assert key_space["seconds"] > 0
    # the measured window is the run time, and the ranges fill it: none of it went to the fill
    assert abs(summary["duration_s"] - 6) < 1
    row = next(row for row in read_csv_rows(tmp_out / "run_latency.csv") if row["Name"] == "range/serializable")
    assert int(row["Count"]) > 0 and int(row["Failures"]) == 0
    assert float(row["Last"]) - float(row["First"]) > 3
    # the fill's puts are no request of the run, nor puts of its keys line: a read run wrote nothing
    assert {request["name"] for request in summary["requests"]} == {"range/serializable", "Aggregated"}
    assert summary["skew"] is None and "key skew: " not in result.stderr
    assert EMPTY_LINE not in result.stderr and RATE_LINE not in result.stderr


def test_a_fill_the_quota_refuses_ends_the_run_with_one_line_and_exit_code_1(tmp_out):
    # 20,000 values of 1 KB cannot fit in an 8 MiB quota, however fast the machine: etcd refuses the fill part-way
    with LocalCluster(1, name="locust-etcd-small-quota", quota_bytes=8 * 1024 * 1024) as cluster:
        args = ("EtcdRangeUser", "--etcd-key-space-size", "20000", "--etcd-metrics-interval", "0")
        result = run_locust(*headless_args(cluster, tmp_out / "run", *args, users=4, seconds=2))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(f"{EMPTY_LINE}the key space fill stopped after "), result.stderr[-3000:]
    refused = " of 20,000 keys (etcdserver: mvcc: database space exceeded), and the users that read it stopped"
    assert line.endswith(refused), line
    assert result.stderr.count(EMPTY_LINE) == 1
    key_space = json.loads((tmp_out / "run_summary.json").read_text())["preparation"]["key_space"]
    assert key_space["error"] == "etcdserver: mvcc: database space exceeded"
    assert 0 < key_space["written"] < key_space["keys"] == 20_000


def test_a_run_without_users_ends_with_one_line_and_exit_code_1(etcd1):
    endpoints = ("--etcd-endpoints", ",".join(etcd1.endpoints))
    result = run_locust(*HEADLESS, "-u", "0", "-t", "1s", *endpoints, "EtcdPutUser")
    assert result.returncode == 1, result.stderr[-3000:]
    assert last_line(result.stderr) == f"{EMPTY_LINE}no user was started (a user count of 0)"


def test_a_rate_no_user_can_hold_says_so_and_which_side_was_short(etcd1, tmp_out):
    args = ("EtcdPutUser", "--etcd-user-rate", "100000", "--etcd-prefix", "/rate-impossible/", "--etcd-cleanup")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *args, users=4, seconds=4))
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stderr.splitlines() if line.startswith(RATE_LINE))
    found = re.search(r"not held: ([\d,]+)/s of the 400,000/s planned \([\d.]+ %, below 90 %\) over the (\d+) s", line)
    assert found is not None, line
    assert int(found[1].replace(",", "")) < 360_000 and int(found[2]) >= 1
    assert "after spawning; the schedule fell " in line and " s behind (intended P50 " in line
    assert "; short: the client's CPU (" in line or "; short: etcd's answers for 4 users: at " in line


def test_a_rate_the_users_hold_says_nothing(etcd1, tmp_out):
    args = ("EtcdPutUser", "--etcd-user-rate", "5", "--etcd-prefix", "/rate-easy/", "--etcd-cleanup")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *args, users=2, seconds=4))
    assert result.returncode == 0, result.stderr[-3000:]
    assert RATE_LINE not in result.stderr and EMPTY_LINE not in result.stderr
    assert any(row["Series"] == "intended" for row in read_csv_rows(tmp_out / "run_latency.csv"))
