"""The exact-latency recorder: its pure parts, then real Locust runs (local, master + workers, --processes).

The runs use ``tests/locustfiles/synthetic_latency.py``, whose users fire known latencies and log them: every
figure in the files is checked against the exact value computed from those logs.
"""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust.env import Environment
from locust.event import Events

import json
import random
import socket
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from support import read_csv_rows, run_locust, start_locust

from etcd_users import latency
from etcd_users.latency import (
    HISTORY_COLUMNS,
    INTENDED,
    INTENDED_CONTEXT_KEY,
    SERVICE,
    SUMMARY_COLUMNS,
    LatencyRow,
    SealedInterval,
)

LOCUSTFILE = "tests/locustfiles/synthetic_latency.py"
PERCENTILE_COLUMNS = {"P50": 50.0, "P90": 90.0, "P95": 95.0, "P99": 99.0, "P99.9": 99.9, "P99.99": 99.99}
HDR_PRECISION = 0.001  # 3 significant digits


class Clock:
    """A settable wall clock for the recorder's per-second bucketing."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(1_700_000_000.25)
    monkeypatch.setattr(latency, "_now", fake)
    return fake


def make_recorder(csv_prefix: str | None = None) -> latency.LatencyRecorder:
    environment = Environment(events=Events(), parsed_options=SimpleNamespace(csv_prefix=csv_prefix))
    return latency.recorder(environment)


def fire(recorder: latency.LatencyRecorder, name: str, ms: float, failed: bool = False, **context: float) -> None:
    recorder.environment.events.request.fire(
        request_type="etcd",
        name=name,
        response_time=ms,
        response_length=0,
        exception="boom" if failed else None,
        context=context,
    )


def histogram_of(values_us: list[int]) -> HdrHistogram:
    histogram = latency.new_histogram()
    for value in values_us:
        histogram.record_value(value)
    return histogram


def row_of(rows: list[LatencyRow], name: str, series: str = SERVICE) -> LatencyRow:
    return next(row for row in rows if row.name == name and row.series == series)


# -- pure parts --


def test_listeners_are_registered_once_per_environment() -> None:
    environment = Environment(events=Events())
    assert latency.recorder(environment) is latency.recorder(environment)
    environment.events.request.fire(
        request_type="etcd", name="put", response_time=1.5, response_length=0, exception=None, context={}
    )
    assert latency.recorder(environment).histogram("etcd", "put").get_total_count() == 1


def test_a_request_without_a_response_time_has_no_latency_and_spoils_nothing() -> None:
    recorder = latency.recorder(Environment(events=Events()))
    for response_time in (None, 1.5):
        fire(recorder, "put", response_time)
    assert recorder.histogram("etcd", "put").get_total_count() == 1


def whole_micros(ms: float) -> int:
    """What the recorder should count a latency in ms as, one value at a time."""
    return min(max(round(ms * 1000.0), latency.LOWEST_US), latency.HIGHEST_US)


def test_values_are_whole_microseconds_within_the_range() -> None:
    def recorded(ms: float) -> int:
        return latency.histogram_of([ms]).min_value

    assert recorded(1.2344) == 1234
    assert recorded(1.2346) == 1235
    assert recorded(0.0001) == 1
    assert recorded(-3.0) == 1
    assert recorded(5e9) == latency.HIGHEST_US


def test_a_second_counted_at_once_equals_recording_each_request() -> None:
    rng = random.Random(5)
    latencies_ms = [rng.lognormvariate(0.5, 1.5) for _ in range(20_000)]
    # the edges: clamped, rounded half to even, each power of two and the value below it (bucket boundaries)
    latencies_ms += [0.0, -1.0, 0.0005, 0.0015, 1.0235, 1.0245, 5e9, 3_600_000.0]
    latencies_ms += [bound / 1000.0 for power in range(1, 32) for bound in (2**power - 1, 2**power)]
    expected = histogram_of([whole_micros(ms) for ms in latencies_ms])
    counted = latency.histogram_of(latencies_ms)
    assert list(counted.counts) == list(expected.counts)
    assert (counted.total_count, counted.min_value, counted.max_value) == (
        len(latencies_ms),
        expected.min_value,
        expected.max_value,
    )
    assert counted.encode() == expected.encode()
    assert latency.histogram_of([]).total_count == 0


def test_fast_percentiles_and_mean_are_hdrh_s() -> None:
    rng = random.Random(3)
    histogram = histogram_of([whole_micros(rng.lognormvariate(0.5, 1.2)) for _ in range(20_000)])
    percentiles = [0.5, 10, 50, 90, 99, 99.9, 99.99, 100]
    for candidate in (histogram, HdrHistogram.decode(histogram.encode())):
        assert latency.percentiles_us(candidate, percentiles) == [
            histogram.get_value_at_percentile(percentile) for percentile in percentiles
        ]
        assert latency.mean_us(candidate) == pytest.approx(histogram.get_mean_value(), rel=1e-12)


def test_merging_worker_reports_gives_one_process_figures(clock: Clock) -> None:
    rng = random.Random(7)
    workers = [make_recorder(), make_recorder()]
    single = make_recorder()
    master = make_recorder()
    for step in range(3000):
        clock.now += 0.002  # 6 s of requests, so several seconds per report
        ms = rng.lognormvariate(0.4, 1.0)
        context = {INTENDED_CONTEXT_KEY: ms + rng.random()}
        failed = rng.random() < 0.02
        name = rng.choice(["put", "range"])
        for recorder in (rng.choice(workers), single):
            fire(recorder, name, ms, failed, **context)
        if step % 700 == 0:  # reports do not fall on second boundaries
            for worker in workers:
                master.merge_report(worker.export_report())
    for worker in workers:
        master.merge_report(worker.export_report())
        report = worker.export_report()
        assert (report["intervals"], report["failures"]) == ([], [])

    assert master.snapshot() == single.snapshot()
    # the run's span is the same too: the first and the last request of all workers
    assert (master.first_request, master.last_request) == (single.first_request, single.last_request)
    for key in [("etcd", "put", SERVICE), ("etcd", "range", INTENDED)]:
        merged, alone = master.histogram(*key), single.histogram(*key)
        assert merged.get_total_count() == alone.get_total_count() > 0
        for percentile in (50, 90, 99, 99.9, 99.99, 100):
            assert merged.get_value_at_percentile(percentile) == alone.get_value_at_percentile(percentile)
    assert per_second(master) == per_second(single)


def per_second(recorder: latency.LatencyRecorder) -> list[tuple]:
    return [
        (interval.second, interval.key, interval.failures, *latency.history_fields(interval))
        for interval in recorder._seal(None)
    ]


def test_failures_are_counted_not_recorded(clock: Clock) -> None:
    recorder = make_recorder()
    fire(recorder, "put", 2.0)
    fire(recorder, "put", 900.0, failed=True)
    fire(recorder, "put", 900.0, failed=True, **{INTENDED_CONTEXT_KEY: 950.0})
    fire(recorder, "delete", 3.0, failed=True)

    rows = recorder.snapshot()
    put = row_of(rows, "put")
    assert (put.count, put.failures, put.max_ms) == (3, 2, 2.0)
    assert recorder.histogram("etcd", "put").get_total_count() == 1
    intended = row_of(rows, "put", INTENDED)
    assert (intended.count, intended.failures, intended.max_ms) == (1, 1, None)
    delete = row_of(rows, "delete")
    assert (delete.count, delete.failures, delete.p50) == (1, 1, None)
    assert latency.summary_fields(delete)[5:] == [""] * 11
    aggregated = rows[-1]
    assert (aggregated.type, aggregated.name, aggregated.series) == ("", "Aggregated", SERVICE)
    assert (aggregated.count, aggregated.failures, aggregated.min_ms) == (4, 3, 2.0)


def test_intended_series_only_when_the_context_has_it(clock: Clock) -> None:
    recorder = make_recorder()
    fire(recorder, "put", 1.0, **{INTENDED_CONTEXT_KEY: 1.75})
    fire(recorder, "range", 1.0, unrelated=3.0)
    rows = recorder.snapshot()
    assert [(row.name, row.series) for row in rows] == [
        ("put", INTENDED),
        ("put", SERVICE),
        ("range", SERVICE),
        ("Aggregated", SERVICE),
    ]
    assert (row_of(rows, "put", INTENDED).p50, row_of(rows, "put").p50) == (1.75, 1.0)


def test_csv_rows_are_milliseconds_with_microsecond_precision() -> None:
    row = LatencyRow("etcd", "put", SERVICE, 12, 2, 0.2, 1.23456, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 15.001)
    assert latency.summary_fields(row, 1700000000.25, 1700000004.5) == [
        "etcd",
        "put",
        SERVICE,
        12,
        2,
        "0.200",
        "1.235",
        "1.000",
        "2.000",
        "3.000",
        "4.000",
        "5.000",
        "6.000",
        "15.001",
        "1700000000.250",
        "1700000004.500",
    ]
    histogram = histogram_of([250, 1000, 14_999])
    fields = latency.history_fields(SealedInterval(1_700_000_000, ("etcd", "put", SERVICE), histogram, 1))
    assert fields == [1_700_000_000, "etcd", "put", SERVICE, 4, 1, 4.0, "1.000", "14.999", "14.999", "14.999"]
    only_failures = latency.history_fields(SealedInterval(1_700_000_001, ("etcd", "put", SERVICE), None, 3))
    assert only_failures[4:] == [3, 3, 3.0, "", "", "", ""]
    assert len(fields) == len(HISTORY_COLUMNS)


def test_hlog_tags_hold_no_comma_or_whitespace() -> None:
    assert latency.hlog_tag(("etcd", "put", SERVICE)) == "etcd:put:service"
    assert latency.hlog_tag(("etcd", "txn a,b\tc\nd", INTENDED)) == "etcd:txn_a_b_c_d:intended"


def test_files_of_a_local_run(clock: Clock, tmp_path: Path) -> None:
    recorder = make_recorder(str(tmp_path / "run"))
    recorder.environment.events.test_start.fire(environment=None)
    expected = defaultdict(list)
    for second in range(3):
        clock.now = 1_700_000_000.5 + second
        for ms in (0.25 * (second + 1), 1.0, 12.5):
            fire(recorder, "put", ms, **{INTENDED_CONTEXT_KEY: ms + 1})
            expected[1_700_000_000 + second].append(ms)
        if second == 1:
            fire(recorder, "put", 1.0, failed=True)
            recorder.flush()  # seconds before the current one are written, the current one waits
    recorder.environment.events.test_stop.fire(environment=None)
    recorder.environment.events.quit.fire(exit_code=0)

    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert list(history[0]) == list(HISTORY_COLUMNS)
    assert [(row["Timestamp"], row["Series"], row["Requests"], row["Failures"]) for row in history] == [
        ("1700000000", INTENDED, "3", "0"),
        ("1700000000", SERVICE, "3", "0"),
        ("1700000001", INTENDED, "3", "0"),
        ("1700000001", SERVICE, "4", "1"),
        ("1700000002", INTENDED, "3", "0"),
        ("1700000002", SERVICE, "3", "0"),
    ]
    assert [row["P50"] for row in history if row["Series"] == SERVICE] == ["1.000", "1.000", "1.000"]

    summary = read_csv_rows(tmp_path / "run_latency.csv")
    assert list(summary[0]) == list(SUMMARY_COLUMNS)
    assert [(row["Series"], row["Count"], row["Failures"], row["Min"], row["Max"]) for row in summary] == [
        (INTENDED, "9", "0", "1.250", "13.503"),
        (SERVICE, "10", "1", "0.250", "12.503"),
        (SERVICE, "10", "1", "0.250", "12.503"),
    ]
    assert summary[-1]["Name"] == "Aggregated" and summary[-1]["Type"] == ""

    intervals = read_hlog(tmp_path / "run_latency.hlog")
    assert [(start, tag, histogram.get_total_count()) for start, tag, histogram in intervals] == [
        (1_700_000_000.0, "etcd:put:intended", 3),
        (1_700_000_000.0, "etcd:put:service", 3),
        (1_700_000_001.0, "etcd:put:intended", 3),
        (1_700_000_001.0, "etcd:put:service", 3),
        (1_700_000_002.0, "etcd:put:intended", 3),
        (1_700_000_002.0, "etcd:put:service", 3),
    ]
    assert "microseconds" in (tmp_path / "run_latency.hlog").read_text()


def test_a_report_for_a_written_second_is_added_not_lost(clock: Clock, tmp_path: Path) -> None:
    master, worker = make_recorder(str(tmp_path / "run")), make_recorder()
    fire(worker, "put", 1.0)
    master.merge_report(worker.export_report())
    clock.now += 10
    master.flush()  # writes the first second
    fire(worker, "put", 2.0)
    clock.now -= 10
    fire(worker, "put", 1.5)  # in the first second, reported after the master wrote it
    master.merge_report(worker.export_report())
    master.flush(final=True)
    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert [(row["Timestamp"], row["Requests"], row["Max"]) for row in history] == [
        ("1700000000", "1", "1.000"),
        ("1700000000", "1", "1.500"),
        ("1700000010", "1", "2.000"),
    ]
    assert row_of(master.snapshot(), "put").count == 3
    master.close()


def test_a_new_run_starts_fresh(clock: Clock, tmp_path: Path) -> None:
    recorder = make_recorder(str(tmp_path / "run"))
    events = recorder.environment.events
    events.test_start.fire(environment=None)
    fire(recorder, "put", 1.0)
    events.test_stop.fire(environment=None)
    clock.now += 5
    events.test_start.fire(environment=None)
    fire(recorder, "range", 2.0)
    events.quit.fire(exit_code=0)
    assert [row.name for row in recorder.snapshot()] == ["range", "Aggregated"]
    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert [row["Name"] for row in history] == ["range"]


# -- real Locust runs --


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


def read_hlog(path: Path) -> list[tuple[float, str, HdrHistogram]]:
    """(absolute start second, tag, histogram) of every interval."""
    reader = HistogramLogReader(str(path), latency.new_histogram())
    intervals = []
    try:
        while (interval := reader.get_next_interval_histogram()) is not None:
            intervals.append((interval.get_start_time_stamp() / 1000, interval.get_tag(), interval))
    finally:
        reader.close()
    return intervals


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    # Locust rewrites _stats.csv every second but not at exit: let the users go quiet before the end.
    run = run_local(tmp_path, fire_seconds=2)
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
        merged.setdefault(tag, latency.new_histogram()).add(histogram)
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
            assert latency.format_ms(histogram.get_value_at_percentile(percentile) / 1000) == row[column]
