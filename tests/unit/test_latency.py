"""The exact latencies without a Locust run: the HDR maths (``etcd_users.hdr``), the store (recording, rolling per
second, workers' reports, merging, sealing, resets), the file fields and tags (``etcd_users.latency.writer``), and
the recorder as ``etcd_users.core.plugin`` wires it into Locust's events (files written on flush, test_start, test_stop,
quit; Reset stats).

Real Locust runs checked against what their users fired are in ``tests/e2e/test_latency.py``.
"""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust import log as locust_log
from locust.env import Environment
from locust.event import Events

import random
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from checks import read_hlog, recorded
from hdrh.histogram import HdrHistogram
from support import read_csv_rows

from etcd_users import hdr
from etcd_users.core import plugin
from etcd_users.files import (
    AGGREGATED,
    INTENDED,
    LATENCY_HISTORY_COLUMNS,
    LATENCY_SUMMARY_COLUMNS,
    SERVICE,
    HlogKey,
)
from etcd_users.latency import store as latency_store
from etcd_users.latency.client_cpu import REPORT_KEY as CPU_REPORT_KEY
from etcd_users.latency.recorder import REPORT_KEY, LatencyRecorder
from etcd_users.latency.store import INTENDED_CONTEXT_KEY, LatencyRow, LatencyStore, SealedInterval
from etcd_users.latency.writer import history_fields, summary_fields


class Clock:
    """A settable wall clock for the store's per-second bucketing."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(1_700_000_000.25)
    monkeypatch.setattr(latency_store, "_now", fake)
    return fake


@pytest.fixture(autouse=True)
def keep_pytest_s_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's init hands Ctrl-C to Locust's main greenlet; in this process it stays pytest's."""
    monkeypatch.setattr(plugin.ctrl_c, "interrupt_main_greenlet_on_ctrl_c", lambda main: None)


def record(store: LatencyStore, name: str, ms: float | None, failed: bool = False, **context: float) -> None:
    """One request as Locust's ``request`` event hands it to the store."""
    store.record(
        request_type="etcd",
        name=name,
        response_time=ms,
        response_length=0,
        exception="boom" if failed else None,
        context=context,
    )


def row_of(rows: list[LatencyRow], name: str, series: str = SERVICE) -> LatencyRow:
    return next(row for row in rows if row.name == name and row.series == series)


def whole_micros(ms: float) -> int:
    """What a latency in ms should be counted as, one value at a time."""
    return min(max(round(ms * 1000.0), hdr.LOWEST_US), hdr.HIGHEST_US)


# -- the HDR maths --


def test_values_are_whole_microseconds_within_the_range() -> None:
    def counted(ms: float) -> int:
        return hdr.histogram_of([ms]).min_value

    assert counted(1.2344) == 1234
    assert counted(1.2346) == 1235
    assert counted(0.0001) == 1
    assert counted(-3.0) == 1
    assert counted(5e9) == hdr.HIGHEST_US


def test_a_second_counted_at_once_equals_recording_each_request() -> None:
    rng = random.Random(5)
    latencies_ms = [rng.lognormvariate(0.5, 1.5) for _ in range(20_000)]
    # the edges: clamped, rounded half to even, each power of two and the value below it (bucket boundaries)
    latencies_ms += [0.0, -1.0, 0.0005, 0.0015, 1.0235, 1.0245, 5e9, 3_600_000.0]
    latencies_ms += [bound / 1000.0 for power in range(1, 32) for bound in (2**power - 1, 2**power)]
    expected = recorded(whole_micros(ms) for ms in latencies_ms)
    counted = hdr.histogram_of(latencies_ms)
    assert list(counted.counts) == list(expected.counts)
    assert (counted.total_count, counted.min_value, counted.max_value) == (
        len(latencies_ms),
        expected.min_value,
        expected.max_value,
    )
    assert counted.encode() == expected.encode()
    assert hdr.histogram_of([]).total_count == 0


def test_fast_percentiles_and_mean_are_hdrh_s() -> None:
    rng = random.Random(3)
    histogram = recorded(whole_micros(rng.lognormvariate(0.5, 1.2)) for _ in range(20_000))
    percentiles = [0.5, 10, 50, 90, 99, 99.9, 99.99, 100]
    for candidate in (histogram, HdrHistogram.decode(histogram.encode())):
        assert hdr.percentiles_us(candidate, percentiles) == [
            histogram.get_value_at_percentile(percentile) for percentile in percentiles
        ]
        assert hdr.mean_us(candidate) == pytest.approx(histogram.get_mean_value(), rel=1e-12)


# -- the store --


def test_a_request_without_a_response_time_has_no_latency_and_spoils_nothing() -> None:
    store = LatencyStore()
    for response_time in (None, 1.5):
        record(store, "put", response_time)
    store.fold_recorded()
    assert store.histogram("etcd", "put").get_total_count() == 1


def test_merging_worker_reports_gives_one_process_figures(clock: Clock) -> None:
    rng = random.Random(7)
    workers = [LatencyStore(), LatencyStore()]
    single = LatencyStore()
    master = LatencyStore()
    for step in range(3000):
        clock.now += 0.002  # 6 s of requests, so several seconds per report
        ms = rng.lognormvariate(0.4, 1.0)
        context = {INTENDED_CONTEXT_KEY: ms + rng.random()}
        failed = rng.random() < 0.02
        name = rng.choice(["put", "range"])
        for store in (rng.choice(workers), single):
            record(store, name, ms, failed, **context)
        if step % 700 == 0:  # reports do not fall on second boundaries
            for worker in workers:
                master.merge_report(worker.export_report())
    for worker in workers:
        master.merge_report(worker.export_report())
        report = worker.export_report()
        assert (report["intervals"], report["failures"]) == ([], [])
    single.fold_recorded()  # what the recorder's snapshot() does first on a single process
    master.fold_recorded()

    assert master.snapshot() == single.snapshot()
    # the run's span is the same too: the first and the last request of all workers
    assert (master.first_request, master.last_request) == (single.first_request, single.last_request)
    for key in [("etcd", "put", SERVICE), ("etcd", "range", INTENDED)]:
        merged, alone = master.histogram(*key), single.histogram(*key)
        assert merged.get_total_count() == alone.get_total_count() > 0
        for percentile in (50, 90, 99, 99.9, 99.99, 100):
            assert merged.get_value_at_percentile(percentile) == alone.get_value_at_percentile(percentile)
    assert per_second(master) == per_second(single)


def per_second(store: LatencyStore) -> list[tuple]:
    return [
        (interval.second, interval.key, interval.failures, *history_fields(interval)) for interval in store.seal(None)
    ]


def test_each_wall_clock_second_is_its_own_interval_and_seals_in_file_order(clock: Clock) -> None:
    store = LatencyStore()
    clock.now = 1_700_000_000.9
    record(store, "range", 4.0)
    record(store, "put", 1.0, **{INTENDED_CONTEXT_KEY: 1.5})
    clock.now = 1_700_000_001.0  # the next second starts a new interval
    record(store, "put", 2.0)
    record(store, "put", 9.0, failed=True)
    clock.now = 1_700_000_003.2  # a quiet second in between has no interval
    record(store, "put", 3.0)
    store.fold_recorded()

    assert contents(store.seal(1_700_000_001)) == [  # before the horizon only; later seconds wait
        (1_700_000_000, ("etcd", "put", INTENDED), recorded([1500]).encode(), 0),
        (1_700_000_000, ("etcd", "put", SERVICE), recorded([1000]).encode(), 0),
        (1_700_000_000, ("etcd", "range", SERVICE), recorded([4000]).encode(), 0),
    ]
    assert store.seal(1_700_000_001) == []  # sealed seconds are out of memory
    assert contents(store.seal(None)) == [
        (1_700_000_001, ("etcd", "put", SERVICE), recorded([2000]).encode(), 1),
        (1_700_000_003, ("etcd", "put", SERVICE), recorded([3000]).encode(), 0),
    ]
    # the run's totals are not sealed away
    assert row_of(store.snapshot(), "put").count == 4
    assert (store.first_request, store.last_request) == (1_700_000_000.9, 1_700_000_003.2)


def contents(intervals: list[SealedInterval]) -> list[tuple]:
    """Sealed intervals by value (hdrh histograms compare by identity): the histogram as its encoding."""
    return [
        (
            interval.second,
            interval.key,
            None if interval.histogram is None else interval.histogram.encode(),
            interval.failures,
        )
        for interval in intervals
    ]


def test_failures_are_counted_not_recorded(clock: Clock) -> None:
    store = LatencyStore()
    record(store, "put", 2.0)
    record(store, "put", 900.0, failed=True)
    record(store, "put", 900.0, failed=True, **{INTENDED_CONTEXT_KEY: 950.0})
    record(store, "delete", 3.0, failed=True)
    store.fold_recorded()

    rows = store.snapshot()
    put = row_of(rows, "put")
    assert (put.count, put.failures, put.max_ms) == (3, 2, 2.0)
    assert store.histogram("etcd", "put").get_total_count() == 1
    intended = row_of(rows, "put", INTENDED)
    assert (intended.count, intended.failures, intended.max_ms) == (1, 1, None)
    delete = row_of(rows, "delete")
    assert (delete.count, delete.failures, delete.p50) == (1, 1, None)
    assert summary_fields(delete)[5:] == [""] * 11
    aggregated = rows[-1]
    assert (aggregated.type, aggregated.name, aggregated.series) == ("", "Aggregated", SERVICE)
    assert (aggregated.count, aggregated.failures, aggregated.min_ms) == (4, 3, 2.0)


def test_intended_series_only_when_the_context_has_it(clock: Clock) -> None:
    store = LatencyStore()
    record(store, "put", 1.0, **{INTENDED_CONTEXT_KEY: 1.75})
    record(store, "range", 1.0, unrelated=3.0)
    store.fold_recorded()
    rows = store.snapshot()
    assert [(row.name, row.series) for row in rows] == [
        ("put", INTENDED),
        ("put", SERVICE),
        ("range", SERVICE),
        ("Aggregated", SERVICE),
    ]
    assert (row_of(rows, "put", INTENDED).p50, row_of(rows, "put").p50) == (1.75, 1.0)


def test_reset_summary_forgets_the_totals_and_keeps_the_seconds(clock: Clock) -> None:
    store = LatencyStore()
    record(store, "put", 1.0)
    clock.now += 1
    store.fold_recorded()
    store.reset_summary()  # Locust's "Reset stats", one second in
    record(store, "put", 2.0)
    store.fold_recorded()
    [put, aggregated] = store.snapshot()
    assert (put.name, put.count, put.min_ms, aggregated.count) == ("put", 1, 2.0, 1)
    assert (store.first_request, store.last_request) == (1_700_000_001.25, 1_700_000_001.25)
    # a worker's report of requests before the reset does not move the run's start before it
    worker = LatencyStore()
    clock.now -= 1
    record(worker, "put", 3.0)
    master_reset_at = 1_700_000_001.25
    store.merge_report(worker.export_report())
    assert store.first_request == master_reset_at
    # the per-second history keeps every second, before and after the reset
    assert [(interval.second, interval.histogram.get_total_count()) for interval in store.seal(None)] == [
        (1_700_000_000, 2),
        (1_700_000_001, 1),
    ]


def test_reset_forgets_everything_for_a_new_run(clock: Clock) -> None:
    store = LatencyStore()
    record(store, "put", 1.0)
    store.merge_report({"intervals": [], "failures": [[1_699_999_999, "etcd", "put", SERVICE, 2]]})
    clock.now += 7
    store.reset()
    assert store.started_at == 1_700_000_007.25
    assert store.seal(None) == []
    assert store.snapshot() == [LatencyRow("", AGGREGATED, SERVICE, 0, 0, *([None] * 9))]
    assert (store.first_request, store.last_request) == (None, None)
    report = store.export_report()  # what was recorded before the reset is not shipped either
    assert (report["intervals"], report["failures"], report["first"]) == ([], [], None)


# -- file fields and tags --


def test_csv_rows_are_milliseconds_with_microsecond_precision() -> None:
    row = LatencyRow("etcd", "put", SERVICE, 12, 2, 0.2, 1.23456, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 15.001)
    assert summary_fields(row, 1700000000.25, 1700000004.5) == [
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
    assert len(summary_fields(row)) == len(LATENCY_SUMMARY_COLUMNS)
    histogram = recorded([250, 1000, 14_999])
    fields = history_fields(SealedInterval(1_700_000_000, ("etcd", "put", SERVICE), histogram, 1))
    assert fields == [1_700_000_000, "etcd", "put", SERVICE, 4, 1, 4.0, "1.000", "14.999", "14.999", "14.999"]
    only_failures = history_fields(SealedInterval(1_700_000_001, ("etcd", "put", SERVICE), None, 3))
    assert only_failures[4:] == [3, 3, 3.0, "", "", "", ""]
    assert len(fields) == len(LATENCY_HISTORY_COLUMNS)


def test_hlog_tags_hold_no_comma_or_whitespace() -> None:
    assert HlogKey("etcd", "put", SERVICE).tag == "etcd:put:service"
    assert HlogKey("etcd", "txn a,b\tc\nd", INTENDED).tag == "etcd:txn_a_b_c_d:intended"
    assert HlogKey.parse("etcd:range/serializable:intended") == ("etcd", "range/serializable", INTENDED)
    assert HlogKey.parse("etcd:put") == ("etcd", "put", SERVICE)  # a tag without a series: the service time


# -- the recorder, wired by the plugin into Locust's events --


def fire_event(environment: Environment, event: str, /, **kwargs) -> None:
    """Fire one of Locust's events; Locust logs a listener's exception and goes on, so the test fails on it here."""
    locust_log.unhandled_greenlet_exception = False
    getattr(environment.events, event).fire(**kwargs)
    assert not locust_log.unhandled_greenlet_exception, f"a listener of {event} raised (its traceback is logged)"


def make_recorder(csv_prefix: str | None = None, reset_stats: bool = False) -> LatencyRecorder:
    """A process's recorder: ``plugin.install(events, etcd=False)``, then ``init`` on its environment."""
    events = Events()
    installed = plugin.install(events, etcd=False)
    options = SimpleNamespace(csv_prefix=csv_prefix)
    environment = Environment(events=events, parsed_options=options, reset_stats=reset_stats)
    fire_event(environment, "init", environment=environment, runner=None, web_ui=None)
    assert installed.get(LatencyRecorder).environment is environment
    return installed.get(LatencyRecorder)


def fire(recorder: LatencyRecorder, name: str, ms: float, failed: bool = False, **context: float) -> None:
    fire_event(
        recorder.environment,
        "request",
        request_type="etcd",
        name=name,
        response_time=ms,
        response_length=0,
        exception="boom" if failed else None,
        context=context,
    )


def test_the_plugin_is_installed_once_per_events() -> None:
    events = Events()
    first = plugin.install(events, etcd=False)
    assert plugin.install(events, etcd=False) is first
    environment = Environment(events=events, parsed_options=SimpleNamespace(csv_prefix=None))
    fire_event(environment, "init", environment=environment, runner=None, web_ui=None)
    fire_event(
        environment,
        "request",
        request_type="etcd",
        name="put",
        response_time=1.5,
        response_length=0,
        exception=None,
        context={},
    )
    assert (
        first.get(LatencyRecorder).histogram("etcd", "put").get_total_count() == 1
    )  # recorded once, not once per install


def test_files_of_a_local_run(clock: Clock, tmp_path: Path) -> None:
    recorder = make_recorder(str(tmp_path / "run"))
    environment = recorder.environment
    fire_event(environment, "test_start", environment=environment)
    expected = defaultdict(list)
    for second in range(3):
        clock.now = 1_700_000_000.5 + second
        for ms in (0.25 * (second + 1), 1.0, 12.5):
            fire(recorder, "put", ms, **{INTENDED_CONTEXT_KEY: ms + 1})
            expected[1_700_000_000 + second].append(ms)
        if second == 1:
            fire(recorder, "put", 1.0, failed=True)
            recorder.flush()  # seconds before the current one are written, the current one waits
            written = read_csv_rows(tmp_path / "run_latency_history.csv")
            assert {row["Timestamp"] for row in written} == {"1700000000"}
    fire_event(environment, "test_stop", environment=environment)
    fire_event(environment, "quit", exit_code=0)

    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert list(history[0]) == list(LATENCY_HISTORY_COLUMNS)
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
    assert list(summary[0]) == list(LATENCY_SUMMARY_COLUMNS)
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

    def report() -> None:
        """What Locust carries from the worker's report_to_master to the master's worker_report."""
        data: dict = {}
        fire_event(worker.environment, "report_to_master", client_id="worker-1", data=data)
        assert set(data) == {REPORT_KEY, CPU_REPORT_KEY}  # the exact latencies and the client CPU samples
        fire_event(master.environment, "worker_report", client_id="worker-1", data=data)

    fire(worker, "put", 1.0)
    report()
    clock.now += 10
    master.flush()  # writes the first second
    fire(worker, "put", 2.0)
    clock.now -= 10
    fire(worker, "put", 1.5)  # in the first second, reported after the master wrote it
    report()
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
    environment = recorder.environment
    fire_event(environment, "test_start", environment=environment)
    fire(recorder, "put", 1.0)
    fire_event(environment, "test_stop", environment=environment)
    clock.now += 5
    fire_event(environment, "test_start", environment=environment)
    fire(recorder, "range", 2.0)
    fire_event(environment, "quit", exit_code=0)
    assert [row.name for row in recorder.snapshot()] == ["range", "Aggregated"]
    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert [row["Name"] for row in history] == ["range"]


@pytest.mark.parametrize(
    "event, reset_stats, counted",
    [
        ("reset_stats", False, 1),  # the web UI's "Reset stats"
        ("spawning_complete", True, 1),  # --reset-stats: once every user is spawned
        ("spawning_complete", False, 3),  # without --reset-stats nothing is forgotten
    ],
)
def test_reset_stats_forgets_the_summary_not_the_history(
    clock: Clock, tmp_path: Path, event: str, reset_stats: bool, counted: int
) -> None:
    recorder = make_recorder(str(tmp_path / "run"), reset_stats=reset_stats)
    environment = recorder.environment
    fire_event(environment, "test_start", environment=environment)
    fire(recorder, "put", 0.5)  # below 2.048 ms every value is exact
    clock.now += 1
    fire(recorder, "put", 1.0)
    fire_event(environment, event, **({"user_count": 1} if event == "spawning_complete" else {}))
    fire(recorder, "put", 1.5)
    fire_event(environment, "test_stop", environment=environment)
    fire_event(environment, "quit", exit_code=0)

    put = next(row for row in read_csv_rows(tmp_path / "run_latency.csv") if row["Name"] == "put")
    assert (int(put["Count"]), put["Max"]) == (counted, "1.500")
    assert put["Min"] == ("1.500" if counted == 1 else "0.500")
    assert put["First"] == ("1700000001.250" if counted == 1 else "1700000000.250")
    assert put["Last"] == "1700000001.250"
    history = read_csv_rows(tmp_path / "run_latency_history.csv")
    assert [(row["Timestamp"], row["Requests"], row["Max"]) for row in history] == [
        ("1700000000", "1", "0.500"),
        ("1700000001", "2", "1.500"),
    ]
