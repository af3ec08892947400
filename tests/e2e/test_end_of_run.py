"""The end of a headless run: ``PREFIX_stats.csv`` counts every request (Locust's own writer misses the last second),
and after Locust's summary the terminal shows the exact latency table and the files written, then the SLA lines.
In one process and with two worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from checks import assert_no_traceback, history
from support import free_port, headless_args, read_csv_rows, run_locust

from etcd_users.latency.table import TITLE

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COLUMNS = ("P50", "P90", "P99", "P99.9", "Max")


def assert_stats_csv_counts_every_request(prefix: Path) -> int:
    """_stats.csv's rows and the history's last row against _latency.csv's counts; the run's request count."""
    stats = {row["Name"]: row for row in read_csv_rows(f"{prefix}_stats.csv")}
    exact = {row["Name"]: row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Series"] == "service"}
    assert set(stats) == set(exact) == {"put", "Aggregated"}
    for name in ("put", "Aggregated"):
        assert int(stats[name]["Request Count"]) == int(exact[name]["Count"]), name
        assert int(stats[name]["Failure Count"]) == int(exact[name]["Failures"]), name
    requests = int(exact["Aggregated"]["Count"])
    assert history(prefix)[-1][1:] == (requests, int(exact["Aggregated"]["Failures"]))
    return requests


def end_of_run_lines(stderr: str) -> tuple[list[str], list[str]]:
    """The exact table, from its title to the blank line under it, and the paths listed after it."""
    lines = stderr.splitlines()
    start = lines.index(TITLE)
    table = lines[start : lines.index("", start)]
    files = lines.index("Files written:", start)
    return table, [line.strip() for line in lines[files + 1 : lines.index("", files)]]


def assert_exact_table_after_locusts_summary(stderr: str, prefix: Path, series: set[str]) -> None:
    lines = stderr.splitlines()
    assert lines.index("Response time percentiles (approximated)") < lines.index(TITLE)
    table, files = end_of_run_lines(stderr)
    assert table[1].split() == ["Type", "Name", "Series", "#", "reqs", "#", "fails", *COLUMNS]
    exact = {(row["Name"], row["Series"]): row for row in read_csv_rows(f"{prefix}_latency.csv")}
    shown = {}
    for line in table[3:]:
        cells = line.split()
        if len(cells) == 1:  # the rule above the Aggregated row
            continue
        if cells[0] == "etcd":
            shown[(cells[1], cells[2])] = cells[3:]
        elif cells[0] == "Aggregated":
            shown[("Aggregated", cells[1])] = cells[2:]
    assert set(shown) == {("put", name) for name in series} | {("Aggregated", "service")}
    for key, cells in shown.items():
        row = exact[key]
        assert cells == [row["Count"], row["Failures"], *(row[column] for column in COLUMNS)], key
    assert files[:3] == [f"{prefix}{suffix}" for suffix in ("_latency.csv", "_latency_history.csv", "_latency.hlog")]
    assert {f"{prefix}_stats.csv", f"{prefix}_stats_history.csv", f"{prefix}_failures.csv"} <= set(files)
    assert all(Path(path).is_file() for path in files)
    # then the SLA lines, last
    assert lines.index("Files written:") < next(i for i, line in enumerate(lines) if line.startswith("SLA "))


def test_a_local_run_ends_with_whole_csv_counts_and_the_exact_table(etcd1, tmp_out):
    prefix = tmp_out / "run"
    args = headless_args(etcd1, prefix, "--etcd-cleanup", "--etcd-user-rate", "100", "--etcd-sla", "errors<1%")
    result = run_locust(*args, "EtcdPutUser", timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    assert assert_stats_csv_counts_every_request(prefix) > 0  # how many is the machine's; all are counted
    assert_exact_table_after_locusts_summary(result.stderr, prefix, {"service", "intended"})


def test_two_worker_processes_end_with_whole_csv_counts_and_the_exact_table(etcd1, tmp_out):
    prefix = tmp_out / "run"
    port = str(free_port())
    args = headless_args(etcd1, prefix, "--etcd-cleanup", "--etcd-sla", "errors<1%", users=4, seconds=3)
    # the forked workers dial --master-port: the master binds the same free port
    master = ("--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port)
    result = run_locust(*args, "--processes", "2", *master, "EtcdPutUser", timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    assert "missing" not in result.stderr, result.stderr[-3000:]
    assert assert_stats_csv_counts_every_request(prefix) > 0  # how many is the machine's; all are counted
    assert_exact_table_after_locusts_summary(result.stderr, prefix, {"service"})
    assert result.stderr.count(TITLE) == 1  # the master's, not the workers'
