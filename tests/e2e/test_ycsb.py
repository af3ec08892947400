"""YCSB's core workloads on a real etcd: workload A's operation shares, workload D's inserts growing the key space,
and the ready suite's table in YCSB's terms, one row group per workload A–F."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse

import etcd3
import pytest
import yaml
from checks import assert_no_traceback, stats_rows
from support import REPO, headless_args, run_locust
from support import run_analysis as cli

pytestmark = pytest.mark.e2e

KEY_SIZE = 40


def run(cluster, csv_prefix, *args: str, seconds: int = 3):
    command = headless_args(cluster, csv_prefix, "--etcd-key-size", str(KEY_SIZE), *args, users=4, seconds=seconds)
    result = run_locust(*command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stderr)
    return result, stats_rows(csv_prefix)


@pytest.mark.slow
def test_workload_a_reads_and_updates_half_and_half_on_zipfian_keys(etcd1, tmp_out):
    args = ("--etcd-prefix", "/ycsb-a/", "--etcd-key-space-size", "1000", "--etcd-cleanup", "--etcd-ycsb", "A")
    result, rows = run(etcd1, tmp_out / "a", *args, "EtcdYcsbUser")
    assert set(rows) == {"ycsb/read", "ycsb/update"}
    reads, updates = (int(rows[name]["Request Count"]) for name in ("ycsb/read", "ycsb/update"))
    assert all(int(row["Failure Count"]) == 0 for row in rows.values())
    assert reads + updates > 200
    share = reads / (reads + updates)
    assert abs(share - 0.5) <= 5 * (0.25 / (reads + updates)) ** 0.5, (reads, updates)
    assert "keys drawn zipfian:0.99" in result.stderr


@pytest.mark.slow
def test_workload_d_inserts_new_keys_past_the_loaded_records(etcd1, tmp_out):
    prefix, size = "/ycsb-d/", 500
    address = urllib.parse.urlsplit(etcd1.endpoints[0])
    client = etcd3.client(address.hostname, address.port, timeout=10)
    try:
        args = ("--etcd-prefix", prefix, "--etcd-key-space-size", str(size), "--etcd-ycsb", "D")
        _, rows = run(etcd1, tmp_out / "d", *args, "EtcdYcsbUser", seconds=2)
        keys = [meta.key.decode() for _, meta in client.get_prefix(prefix, keys_only=True)]
    finally:
        client.delete_prefix(prefix)
        client.close()
    assert set(rows) == {"ycsb/read", "ycsb/insert"}
    inserts = int(rows["ycsb/insert"]["Request Count"]) - int(rows["ycsb/insert"]["Failure Count"])
    assert inserts > 0
    # every insert a key of its own after the loaded ones (Locust's final CSV may miss the last few)
    assert len(keys) - size >= inserts
    width = KEY_SIZE - len(prefix)
    assert f"{prefix}{size:0{width}d}" in keys and all(len(key) == KEY_SIZE for key in keys)


@pytest.mark.slow
def test_the_ycsb_suite_prints_one_row_group_per_workload(etcd1, tmp_path):
    suite = yaml.safe_load((REPO / "suites" / "ycsb.yaml").read_text())
    assert suite["axes"] == {"ycsb": ["A", "B", "C", "D", "E", "F"]}
    # the ready suite's workloads, briefly, on the shared etcd (each run cleans its prefix up); docs/suites.md's
    # quick run of the same suite is not run again by tests/e2e/test_docs_commands.py
    suite.update(duration=1, users=2, endpoints=etcd1.endpoints, fixed={"key-space-size": 200, "prefix": "/ycsb-s/"})
    suite.pop("quick")
    path = tmp_path / "ycsb.yaml"
    path.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "etcd_users.suite", "run", str(path), "--out", str(out)]
    ran = subprocess.run(command, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert_no_traceback(ran.stdout + ran.stderr)
    result = cli("suite", out)
    assert result.returncode == 0, result.stderr
    assert_no_traceback(result.stderr)
    header = "| workload | operation | operations | ops/s | avg (µs) | P95 (µs) | P99 (µs) | errors |"
    table = result.stdout.split(header)
    assert len(table) == 2, result.stdout
    rows = [line.strip("| ").split(" | ") for line in table[1].strip().splitlines()[1:] if line.startswith("|")]
    by_workload: dict[str, list[str]] = {}
    for row in rows:
        by_workload.setdefault(row[0], []).append(row[1])
        assert float(row[3]) > 0 and row[7] == "0", row
        if row[1] != "OVERALL":
            assert 0 < float(row[4]) and float(row[5]) <= float(row[6]), row
    assert by_workload == {
        "A (update heavy)": ["OVERALL", "READ", "UPDATE"],
        "B (read mostly)": ["OVERALL", "READ", "UPDATE"],
        "C (read only)": ["OVERALL", "READ"],
        "D (read latest)": ["OVERALL", "READ", "INSERT"],
        "E (short ranges)": ["OVERALL", "INSERT", "SCAN"],
        "F (read-modify-write)": ["OVERALL", "READ", "READ-MODIFY-WRITE"],
    }
    assert (out / "analysis" / "ycsb.csv").is_file() and (out / "analysis" / "ycsb.md").is_file()


@pytest.mark.slow
def test_the_ycsb_user_without_a_workload_is_refused_at_start_in_one_line(etcd1):
    args = ("--etcd-endpoints", etcd1.endpoints[0], "--etcd-prefix", "/ycsb-none/", "EtcdYcsbUser")
    result = run_locust("-f", "locustfile.py", "--headless", "-u", "1", "-r", "1", "-t", "5s", *args, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert_no_traceback(result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    said = "--etcd-ycsb: EtcdYcsbUser needs a workload; give one of A, B, C, D, E, F (e.g. --etcd-ycsb A)"
    assert errors == [f"locust-etcd: error: {said}"]
