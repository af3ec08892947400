"""The file contract between the writers and the analysis (``etcd_users.files``), round trip: files written by the
tool's own writers from known data, read back by ``analysis``, give the figures ``etcd_users.hdr`` gives on the same
data. No Locust run: the exact latency files come from a ``LatencyStore`` on a patched clock, the members' metrics
from the poller fed with parsed pages."""

import locust  # noqa: F401  (gevent patching before anything else loads: the poller imports Locust)

import random
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from etcd_users import hdr
from etcd_users.analysis.hlog import merge_intervals
from etcd_users.analysis.load import load_run, read_etcd_metrics, total_requests
from etcd_users.files import (
    AGGREGATED,
    ETCD_METRICS_COLUMNS,
    INTENDED,
    LATENCY_HISTORY_COLUMNS,
    LATENCY_SUMMARY_COLUMNS,
    LATENCY_SUMMARY_PERCENTILES,
    SERVICE,
    SUFFIXES,
    HlogKey,
)
from etcd_users.latency import store as latency_store
from etcd_users.latency.store import INTENDED_CONTEXT_KEY, LatencyStore
from etcd_users.latency.writer import LatencyFiles
from etcd_users.members import server_metrics
from etcd_users.members.server_metrics import MetricsPoller, error_fields, parse_scrape, row_fields

T0 = 1_700_000_000
SECONDS = 4
SUMMARY_PERCENTILE_COLUMNS = ("P50", "P90", "P95", "P99", "P99.9", "P99.99")


# -- the exact latency files --


class KnownRun:
    """What was recorded, per (name, series): every successful latency in ms by second, and the failures."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.failures: dict[tuple[str, str], int] = defaultdict(int)

    def latencies(self, key: tuple[str, str], seconds=range(T0, T0 + SECONDS)) -> list[float]:
        return [ms for second in seconds for ms in self.values[key].get(second, [])]

    def requests(self, key: tuple[str, str]) -> int:
        return len(self.latencies(key)) + self.failures[key]


@pytest.fixture
def written(tmp_path, monkeypatch) -> tuple[str, KnownRun, LatencyStore]:
    """A run's three latency files, written as the recorder writes them, and what went into them."""
    now = [T0 + 0.25]
    monkeypatch.setattr(latency_store, "_now", lambda: now[0])
    store = LatencyStore()
    known = KnownRun()
    rng = random.Random(11)
    for step in range(1000):
        now[0] = T0 + 0.25 + step * 0.0035  # 1000 requests over 3.5 s: into the 4th second
        second = int(now[0])
        name = "put" if rng.random() < 0.6 else "range/serializable"
        service = rng.lognormvariate(0.3, 1.1)
        intended = service + rng.expovariate(2.0) if name == "put" else None
        context = {} if intended is None else {INTENDED_CONTEXT_KEY: intended}
        failed = rng.random() < 0.03
        store.record("etcd", name, service, exception="boom" if failed else None, context=context)
        for series, ms in ((SERVICE, service), (INTENDED, intended)):
            if ms is None:
                continue
            if failed:
                known.failures[(name, series)] += 1
            else:
                known.values[(name, series)][second].append(ms)
    store.fold_recorded()
    prefix = str(tmp_path / "run")
    files = LatencyFiles(prefix, store.started_at)
    files.append(store.seal(None))
    files.write_summary(store.snapshot(), store.first_request, store.last_request)
    files.close()
    return prefix, known, store


def test_a_run_of_only_the_exact_files_loads(written):
    prefix, known, _ = written
    run = load_run(prefix)
    assert (run.stats, run.history, run.etcd_metrics, run.shape) == (None, None, None, None)  # no Locust CSVs
    assert list(run.latency.columns) == list(LATENCY_SUMMARY_COLUMNS)
    assert list(run.latency_history.columns) == list(LATENCY_HISTORY_COLUMNS)
    assert run.hlog_path is not None and str(run.hlog_path) == prefix + SUFFIXES["hlog"]
    # the requests of the run: the series that saw most of them (service; intended is put's alone)
    assert total_requests(run) == known.requests(("put", SERVICE)) + known.requests(("range/serializable", SERVICE))
    assert load_run(prefix + SUFFIXES["latency"]).prefix == prefix  # a file's path names its run too


def test_the_summary_reads_back_as_hdr_computes_it(written):
    prefix, known, store = written
    summary = load_run(prefix).latency
    rows = {(row["Name"], row["Series"]): row for _, row in summary.iterrows()}
    keys = [("put", INTENDED), ("put", SERVICE), ("range/serializable", SERVICE)]
    assert list(rows) == [*keys, (AGGREGATED, SERVICE)]  # sorted, then the Aggregated row
    known_latencies = {key: known.latencies(key) for key in keys}
    known_latencies[(AGGREGATED, SERVICE)] = known.latencies(("put", SERVICE)) + known.latencies(
        ("range/serializable", SERVICE)
    )
    failures = {key: known.failures[key] for key in keys}
    failures[(AGGREGATED, SERVICE)] = known.failures[("put", SERVICE)] + known.failures[("range/serializable", SERVICE)]
    for key, row in rows.items():
        latencies = known_latencies[key]
        histogram = hdr.histogram_of(latencies)
        assert (row["Count"], row["Failures"]) == (len(latencies) + failures[key], failures[key]), key
        expected = hdr.percentiles_us(histogram, LATENCY_SUMMARY_PERCENTILES)
        assert [row[column] for column in SUMMARY_PERCENTILE_COLUMNS] == [value / 1000 for value in expected], key
        assert (row["Min"], row["Max"]) == (histogram.get_min_value() / 1000, histogram.get_max_value() / 1000), key
        assert row["Mean"] == pytest.approx(hdr.mean_us(histogram) / 1000, abs=0.0005), key
        assert row["Type"] == ("" if key[0] == AGGREGATED else "etcd")
        # the run's window: its first and last request, to the millisecond
        assert (row["First"], row["Last"]) == (round(store.first_request, 3), round(store.last_request, 3))


def test_the_history_holds_each_second_of_each_key(written):
    prefix, known, _ = written
    history = load_run(prefix).latency_history
    assert sorted(set(history["Timestamp"])) == list(range(T0, T0 + SECONDS))
    for _, row in history.iterrows():
        key, second = (row["Name"], row["Series"]), int(row["Timestamp"])
        latencies = known.values[key][second]
        histogram = hdr.histogram_of(latencies)
        assert row["Requests"] - row["Failures"] == len(latencies) == row["QPS"] - row["Failures"], (key, second)
        p50, p99, p999 = hdr.percentiles_us(histogram, (50.0, 99.0, 99.9))
        assert (row["P50"], row["P99"], row["P99.9"], row["Max"]) == (
            p50 / 1000,
            p99 / 1000,
            p999 / 1000,
            histogram.get_max_value() / 1000,
        ), (key, second)
    by_key = history.groupby(["Name", "Series"])[["Requests", "Failures"]].sum()
    for (name, series), sums in by_key.iterrows():
        assert (sums["Requests"], sums["Failures"]) == (known.requests((name, series)), known.failures[(name, series)])


@pytest.mark.parametrize("cut_s", [None, T0 + 2], ids=["whole run", "after a cut"])
def test_the_hlog_merges_back_into_the_same_histograms(written, cut_s):
    prefix, known, _ = written
    merged = merge_intervals(load_run(prefix).hlog_path, cut_s)
    keys = [("put", INTENDED), ("put", SERVICE), ("range/serializable", SERVICE)]
    assert set(merged) == {HlogKey("etcd", name, series) for name, series in keys}
    seconds = range(T0 if cut_s is None else cut_s, T0 + SECONDS)  # an interval counts when most of it is after
    percentiles = (1.0, 50.0, 90.0, 99.0, 99.9, 100.0)
    for name, series in keys:
        histogram = merged[HlogKey("etcd", name, series)]
        expected = hdr.histogram_of(known.latencies((name, series), seconds))
        assert histogram.get_total_count() == expected.get_total_count() > 0, (name, series)
        assert hdr.percentiles_us(histogram, percentiles) == hdr.percentiles_us(expected, percentiles), (name, series)
        assert (histogram.get_min_value(), histogram.get_max_value()) == (
            expected.get_min_value(),
            expected.get_max_value(),
        )


# -- the members' metrics file --

PAGE = """\
etcd_server_is_leader {leader}
etcd_server_has_leader 1
etcd_server_leader_changes_seen_total 3
etcd_server_proposals_committed_total {committed}
etcd_server_proposals_applied_total 1000
etcd_server_proposals_pending 2
etcd_server_proposals_failed_total 4
etcd_mvcc_db_total_size_in_bytes 40960
etcd_mvcc_db_total_size_in_use_in_bytes 32768
etcd_server_quota_backend_bytes 2147483648
process_resident_memory_bytes 50000000
process_cpu_seconds_total 1.5
process_open_fds 42
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.001"}} {fast}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.008"}} 10
etcd_disk_wal_fsync_duration_seconds_bucket{{le="+Inf"}} 10
etcd_disk_backend_commit_duration_seconds_bucket{{le="0.016"}} 5
etcd_disk_backend_commit_duration_seconds_bucket{{le="+Inf"}} 5
grpc_server_handled_total{{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"}} 12
etcd_debugging_mvcc_keys_total 7
etcd_debugging_mvcc_watch_stream_total 8
etcd_debugging_mvcc_watcher_total 9
"""


def page(leader: int, committed: int, fast: int):
    return parse_scrape(PAGE.format(leader=leader, committed=committed, fast=fast))


def test_row_and_error_fields_are_the_columns_in_order():
    assert server_metrics.COLUMNS is ETCD_METRICS_COLUMNS
    fields = row_fields(T0 + 0.5, "http://m1:2379", page(1, 1001, 10), page(1, 990, 0))
    # every column has a value of its own: a column moved or dropped shows as a mismatch here
    assert dict(zip(ETCD_METRICS_COLUMNS, fields, strict=True)) == {
        "Timestamp": "1700000000.500",
        "Member": "http://m1:2379",
        "IsLeader": 1,
        "HasLeader": 1,
        "LeaderChanges": 3,
        "ProposalsCommitted": 1001,
        "ProposalsApplied": 1000,
        "ProposalsPending": 2,
        "ProposalsFailed": 4,
        "DbSizeBytes": 40960,
        "DbSizeInUseBytes": 32768,
        "QuotaBytes": 2147483648,
        "RssBytes": 50000000,
        "CpuSeconds": 1.5,
        "FsyncP99Ms": "0.990",  # 10 new samples, all under 1 ms: rank 9.9 of 10 in (0, 1 ms]
        "BackendCommitP99Ms": "",  # no new sample since the previous scrape
        "GrpcRequests": "Put:OK=12",
        "Keys": 7,
        "WatchStreams": 8,
        "Watchers": 9,
        "Error": "",
        "PeerRttP99Ms": "",  # one member: no peers
        "SnapshotSaveP99Ms": "",
        "SlowApplies": "",
        "FsyncBuckets": "0.001=10;0.008=10;inf=10",
        "BackendCommitBuckets": "0.016=5;inf=5",
        "PeerRttBuckets": "",
        "SnapshotSaveBuckets": "",
        "OpenFds": 42,
    }
    failed = error_fields(T0 + 0.5, "http://m2:2379", "connection refused")
    assert dict(zip(ETCD_METRICS_COLUMNS, failed, strict=True)) == {column: "" for column in ETCD_METRICS_COLUMNS} | {
        "Timestamp": "1700000000.500",
        "Member": "http://m2:2379",
        "Error": "connection refused",
    }


def test_the_poller_s_file_reads_back_in_the_analysis(tmp_path):
    """Two polls of two members, the second member failing once: the file as the poller writes it."""
    members = [("http://m1:2379", "http://m1:2379/metrics"), ("http://m2:2379", "http://m2:2379/metrics")]
    answers = [
        [page(1, 1001, 0), "HTTP 503 Service Unavailable"],
        [page(1, 1101, 10), page(0, 1100, 0)],
    ]
    scraper = SimpleNamespace(fetch_all=lambda urls: answers.pop(0), timeout=1.0)
    path = tmp_path / f"run{SUFFIXES['etcd_metrics']}"
    poller = MetricsPoller(members, 1.0, scraper, str(path))
    poller.poll()
    poller.poll()
    poller.stop()  # never started: closes the file without a poll

    frame = read_etcd_metrics(path)
    assert list(frame.columns) == list(ETCD_METRICS_COLUMNS)
    assert list(frame["Member"]) == ["http://m1:2379", "http://m2:2379", "http://m1:2379", "http://m2:2379"]
    assert list(frame["Error"]) == ["", "HTTP 503 Service Unavailable", "", ""]
    assert frame["Timestamp"].is_monotonic_increasing and frame["Timestamp"].notna().all()
    assert list(frame["IsLeader"].iloc[[0, 2, 3]]) == [1.0, 1.0, 0.0]
    assert list(frame["ProposalsCommitted"].iloc[[0, 2, 3]]) == [1001.0, 1101.0, 1100.0]
    failed = frame.iloc[1]
    assert all(np.isnan(failed[column]) for column in ("IsLeader", "DbSizeBytes", "RssBytes", "CpuSeconds"))
    # an interval's P99 needs the member's previous answer: m1's second row only (m2's first answer failed)
    assert np.isnan(frame["FsyncP99Ms"].iloc[0]) and np.isnan(frame["FsyncP99Ms"].iloc[3])
    assert frame["FsyncP99Ms"].iloc[2] == 0.99
    assert list(frame["GrpcRequests"]) == ["Put:OK=12", "", "Put:OK=12", "Put:OK=12"]


def test_the_poller_polls_a_member_added_during_the_run_from_then_on(tmp_path):
    first = [("http://m1:2379", "http://m1:2379/metrics")]
    now = list(first)
    asked: list[list[str]] = []

    def fetch_all(urls):
        asked.append(list(urls))
        return [page(1, 1001, 0) for _ in urls]

    scraper = SimpleNamespace(fetch_all=fetch_all, timeout=1.0)
    poller = MetricsPoller(first, 1.0, scraper, str(tmp_path / "m.csv"), members_now=lambda: now)
    poller.poll()
    now.append(("http://m2:2379", "http://m2:2379/metrics"))  # add-learner: the local etcd grew
    poller.poll()
    poller.stop()
    assert asked == [["http://m1:2379/metrics"], ["http://m1:2379/metrics", "http://m2:2379/metrics"]]
    assert [row["Member"] for row in poller.rows] == ["http://m1:2379", "http://m1:2379", "http://m2:2379"]
