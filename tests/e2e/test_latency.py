"""The exact-latency recorder in real Locust runs: local, master + workers, --processes.

The runs use ``tests/locustfiles/synthetic_latency.py``, whose users fire known latencies and log them: every
figure in the files is checked against the exact value computed from those logs. The recorder's pure parts are
``tests/unit/test_latency.py``.
"""

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from checks import read_hlog
from hdrh.histogram import HdrHistogram
from support import free_port, read_csv_rows, run_locust, start_locust

from etcd_users import hdr
from etcd_users.files import INTENDED, SERVICE
from etcd_users.latency.writer import format_ms

pytestmark = pytest.mark.e2e

LOCUSTFILE = "tests/locustfiles/synthetic_latency.py"  # relative to the repository, where Locust runs
PERCENTILE_COLUMNS = {"P50": 50.0, "P90": 90.0, "P95": 95.0, "P99": 99.0, "P99.9": 99.9, "P99.99": 99.99}
HDR_PRECISION = 0.001  # 3 significant digits


@dataclass
class Truth:
    """What the synthetic users fired, read from their logs; keys are (name, series)."""

    requests: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    values_us: defaultdict = field(default_factory=lambda: defaultdict(list))
    processes: int = 0


def read_truth(log_dir: Path) -> Truth:
    truth = Truth()
    for log in log_dir.glob("*.log"):
        truth.processes += 1
        for line in log.read_text().splitlines():
            name, status, service_ms, intended_ms = line.split()
            for series, ms in ((SERVICE, service_ms), (INTENDED, intended_ms)):
                if ms == "-":
                    continue
                truth.requests[(name, series)] += 1
                if status == "fail":
                    truth.failures[(name, series)] += 1
                else:
                    truth.values_us[(name, series)].append(max(1, round(float(ms) * 1000)))
    return truth


def exact_percentile(sorted_values: list[int], percentile: float) -> int:
    """The value at HdrHistogram's rank for ``percentile``."""
    rank = max(1, int(percentile * len(sorted_values) / 100 + 0.5))
    return sorted_values[rank - 1]


def assert_within_precision(actual_ms: str, exact_us: float, what: str) -> None:
    actual_us = float(actual_ms) * 1000
    assert abs(actual_us - exact_us) <= exact_us * HDR_PRECISION + 0.5, f"{what}: {actual_us} vs exact {exact_us}"


@dataclass
class RunFiles:
    prefix: Path
    log_dir: Path
    outputs: list[str]

    def path(self, suffix: str) -> Path:
        return Path(f"{self.prefix}{suffix}")


def synthetic_environment(log_dir: Path, fire_seconds: float = 0, slow_stop_seconds: float = 0) -> dict[str, str]:
    log_dir.mkdir(parents=True)
    return {
        "SYNTHETIC_LATENCY_LOG_DIR": str(log_dir),
        "SYNTHETIC_LATENCY_FIRE_SECONDS": str(fire_seconds),
        "SYNTHETIC_LATENCY_SLOW_STOP_SECONDS": str(slow_stop_seconds),
    }


def headless(prefix: Path, run_time: str) -> list[str]:
    return [
        *("-f", LOCUSTFILE, "--headless", "-u", "4", "-r", "20", "-t", run_time),
        *("--csv", str(prefix), "--json-file", str(prefix), "--exit-code-on-error", "0", "--only-summary"),
    ]


def run_local(tmp: Path, fire_seconds: float = 0) -> RunFiles:
    env = synthetic_environment(tmp / "logs", fire_seconds)
    result = run_locust(*headless(tmp / "run", "4s"), env=env, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return RunFiles(tmp / "run", tmp / "logs", [result.stderr])


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> RunFiles:
    return run_local(tmp_path_factory.mktemp("local"))


@pytest.fixture(scope="module")
def distributed_run(tmp_path_factory: pytest.TempPathFactory) -> RunFiles:
    tmp = tmp_path_factory.mktemp("distributed")
    # Workers slower to stop than the master's 0.5 s wait: their last report must still be counted.
    env = synthetic_environment(tmp / "logs", slow_stop_seconds=1.5)
    port = free_port()
    master_args = [*headless(tmp / "run", "5s"), "--master", "--expect-workers", "2"]
    master_args += ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
    worker_args = ["-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    with start_locust(*master_args, env=env, log_dir=tmp) as master:
        with (
            start_locust(*worker_args, env=env, log_dir=tmp) as first,
            start_locust(*worker_args, env=env, log_dir=tmp) as second,
        ):
            finished = master.finish(timeout=60)
            assert finished.returncode == 0, finished.stderr[-3000:]
            outputs = [finished.stderr, *(worker.finish(timeout=30).stderr for worker in (first, second))]
    return RunFiles(tmp / "run", tmp / "logs", outputs)


@pytest.fixture(scope="module")
def processes_run(tmp_path_factory: pytest.TempPathFactory) -> RunFiles:
    tmp = tmp_path_factory.mktemp("processes")
    env = synthetic_environment(tmp / "logs")
    result = run_locust(*headless(tmp / "run", "4s"), "--processes", "2", env=env, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return RunFiles(tmp / "run", tmp / "logs", [result.stderr])


def check_against_truth(run: RunFiles, processes: int) -> Truth:
    """Every figure of the latency CSVs against the logs; returns the truth for run-specific checks."""
    for output in run.outputs:
        for trouble in ("Traceback", "Uncaught exception", "sent no last report"):
            assert trouble not in output, output[-3000:]
    truth = read_truth(run.log_dir)
    assert truth.processes == processes
    assert truth.failures[("put", SERVICE)] + truth.failures[("get", SERVICE)] > 0

    rows = {(row["Name"], row["Series"]): row for row in read_csv_rows(run.path("_latency.csv"))}
    assert set(rows) == {*truth.requests, ("Aggregated", SERVICE)}
    truth.values_us[("Aggregated", SERVICE)] = truth.values_us[("get", SERVICE)] + truth.values_us[("put", SERVICE)]
    truth.requests[("Aggregated", SERVICE)] = truth.requests[("get", SERVICE)] + truth.requests[("put", SERVICE)]
    truth.failures[("Aggregated", SERVICE)] = truth.failures[("get", SERVICE)] + truth.failures[("put", SERVICE)]
    for key, row in rows.items():
        assert (int(row["Count"]), int(row["Failures"])) == (truth.requests[key], truth.failures[key]), key
        values = sorted(truth.values_us[key])
        assert_within_precision(row["Min"], values[0], f"{key} Min")
        assert_within_precision(row["Max"], values[-1], f"{key} Max")
        assert_within_precision(row["Mean"], sum(values) / len(values), f"{key} Mean")
        for column, percentile in PERCENTILE_COLUMNS.items():
            assert_within_precision(row[column], exact_percentile(values, percentile), f"{key} {column}")

    history = read_csv_rows(run.path("_latency_history.csv"))
    order = [(int(row["Timestamp"]), row["Type"], row["Name"], row["Series"]) for row in history]
    assert order == sorted(order) and len(set(order)) == len(order)
    requests, failures = Counter(), Counter()
    for row in history:
        requests[(row["Name"], row["Series"])] += int(row["Requests"])
        failures[(row["Name"], row["Series"])] += int(row["Failures"])
        assert float(row["QPS"]) == int(row["Requests"])
    for key in truth.requests:
        if key[0] != "Aggregated":
            assert (requests[key], failures[key]) == (truth.requests[key], truth.failures[key]), key

    locust_final = {entry["name"]: entry for entry in json.loads(run.path(".json").read_text())}
    for name in ("get", "put"):
        assert locust_final[name]["num_requests"] == truth.requests[(name, SERVICE)]
        assert locust_final[name]["num_failures"] == truth.failures[(name, SERVICE)]
    return truth


@pytest.mark.slow
def test_local_run_matches_what_the_users_fired(local_run: RunFiles) -> None:
    check_against_truth(local_run, processes=1)


@pytest.mark.slow
def test_local_run_counts_match_locust_stats_csv(tmp_path: Path) -> None:
    # Locust rewrites _stats.csv every second but not at exit (and --json-file clears its per-name figures):
    # the tool completes the file, so users may fire to the very end
    run = run_local(tmp_path)
    truth = check_against_truth(run, processes=1)
    stats = {row["Name"]: row for row in read_csv_rows(run.path("_stats.csv"))}
    for name in ("get", "put"):
        assert int(stats[name]["Request Count"]) == truth.requests[(name, SERVICE)]
        assert int(stats[name]["Failure Count"]) == truth.failures[(name, SERVICE)]


@pytest.mark.slow
def test_master_merges_two_workers(distributed_run: RunFiles) -> None:
    check_against_truth(distributed_run, processes=2)


@pytest.mark.slow
def test_processes_merge(processes_run: RunFiles) -> None:
    check_against_truth(processes_run, processes=2)


@pytest.mark.slow
@pytest.mark.parametrize("run_name", ["local_run", "distributed_run", "processes_run"])
def test_hlog_reads_back_as_the_csv(run_name: str, request: pytest.FixtureRequest) -> None:
    run: RunFiles = request.getfixturevalue(run_name)
    merged: dict[str, HdrHistogram] = {}
    seconds: set[tuple[int, str]] = set()
    for start, tag, histogram in read_hlog(run.path("_latency.hlog")):
        assert start == int(start)
        seconds.add((int(start), tag))
        merged.setdefault(tag, hdr.new_histogram()).add(histogram)
    history = read_csv_rows(run.path("_latency_history.csv"))
    with_latencies = {
        (int(row["Timestamp"]), f"{row['Type']}:{row['Name']}:{row['Series']}")
        for row in history
        if int(row["Requests"]) > int(row["Failures"])
    }
    assert seconds == with_latencies
    rows = [row for row in read_csv_rows(run.path("_latency.csv")) if row["Name"] != "Aggregated"]
    assert {f"{row['Type']}:{row['Name']}:{row['Series']}" for row in rows} == set(merged)
    for row in rows:
        histogram = merged[f"{row['Type']}:{row['Name']}:{row['Series']}"]
        assert histogram.get_total_count() == int(row["Count"]) - int(row["Failures"])
        for column, percentile in PERCENTILE_COLUMNS.items():
            assert format_ms(histogram.get_value_at_percentile(percentile) / 1000) == row[column]
