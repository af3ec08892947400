"""Server metrics and the pre-flight report, pure: Prometheus' histogram_quantile, a /metrics page into a row of
``PREFIX_etcd_metrics.csv``, and the pre-flight lines. The poller against real members and real runs are
``tests/e2e/test_server_metrics.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads)

import logging
import math

import pytest

from etcd_users.members.preflight import (
    BurstResult,
    MemberReport,
    burst_line,
    format_bytes,
    member_report,
    report_lines,
)
from etcd_users.members.server_metrics import (
    COLUMNS,
    FSYNC,
    bucket_delta,
    format_grpc,
    histogram_quantile,
    interval_p99_ms,
    parse_scrape,
    row_fields,
)
from etcd_users.settings import Endpoint
from etcd_users.transport.pool import MemberStatus

INF = math.inf


# -- histogram_quantile: hand-made buckets with known answers ------------------------------------------------


@pytest.mark.parametrize(
    "quantile, buckets, expected",
    [
        # rank 10 of 20 reaches the first bucket's count exactly: its upper bound
        (0.5, [(1.0, 10), (2.0, 20), (INF, 20)], 1.0),
        # rank 15: 5 of the second bucket's 10, half way from 1 to 2
        (0.75, [(1.0, 10), (2.0, 20), (INF, 20)], 1.5),
        # the lowest bucket starts at 0: rank 2.5 of its 10 is a quarter of the way to 1
        (0.125, [(1.0, 10), (2.0, 20), (INF, 20)], 0.25),
        # etcd's fsync buckets: rank 99 of 100 is the first of the 2 samples in (4 ms, 8 ms]: 6 ms
        (0.99, [(0.001, 0), (0.002, 90), (0.004, 98), (0.008, 100), (0.016, 100), (INF, 100)], 0.006),
        # rank 99 of 1000 in (1 ms, 2 ms], which holds 100 samples past the first 50: 1 ms + 49/100 ms
        (0.099, [(0.001, 50), (0.002, 150), (INF, 1000)], 0.00149),
        # rank in the +Inf bucket: the highest finite bound, as Prometheus answers
        (0.99, [(1.0, 10), (2.0, 15), (INF, 20)], 2.0),
        # bucket order does not matter; a bucket listed twice is summed
        (0.75, [(INF, 20), (2.0, 20), (1.0, 4), (1.0, 6)], 1.5),
        # a count lower than the bucket below it (a scrape mid-update) is raised to it
        (0.75, [(1.0, 10), (2.0, 20), (3.0, 19), (INF, 20)], 1.5),
        # a first bucket at or below zero answers its own bound
        (0.25, [(0.0, 10), (1.0, 20), (INF, 20)], 0.0),
    ],
)
def test_histogram_quantile_known_answers(quantile, buckets, expected):
    assert histogram_quantile(quantile, buckets) == pytest.approx(expected)


@pytest.mark.parametrize(
    "buckets",
    [
        [],
        [(INF, 5)],  # one bucket: nothing to interpolate
        [(1.0, 5), (2.0, 10)],  # no +Inf bucket
        [(1.0, 0), (2.0, 0), (INF, 0)],  # no samples
    ],
)
def test_histogram_quantile_without_an_answer(buckets):
    assert histogram_quantile(0.99, buckets) is None


def test_histogram_quantile_refuses_a_quantile_out_of_range():
    with pytest.raises(ValueError):
        histogram_quantile(1.5, [(1.0, 1), (INF, 1)])


def test_interval_p99_comes_from_the_difference_of_two_scrapes():
    before = {0.001: 100, 0.002: 100, 0.004: 100, 0.008: 100, 0.016: 100, INF: 100}
    # 100 new samples: 90 under 2 ms, 8 in (2, 4], 2 in (8, 16]
    after = {0.001: 100, 0.002: 190, 0.004: 198, 0.008: 198, 0.016: 200, INF: 200}
    assert bucket_delta(after, before) == {0.001: 0, 0.002: 90, 0.004: 98, 0.008: 98, 0.016: 100, INF: 100}
    assert interval_p99_ms(after, before) == pytest.approx(12.0)  # rank 99: half way through (8, 16]
    assert interval_p99_ms(after, None) is None  # no previous scrape: no interval
    assert interval_p99_ms(before, before) is None  # no sample in the interval
    restarted = {0.001: 0, 0.002: 1, 0.004: 2, 0.008: 2, 0.016: 2, INF: 2}
    assert bucket_delta(restarted, before) == restarted  # counters went back: counted from the restart


# -- parsing a /metrics page into a row ----------------------------------------------------------------------

PAGE = """\
# HELP etcd_server_is_leader Whether or not this member is a leader.
# TYPE etcd_server_is_leader gauge
etcd_server_is_leader 1
etcd_server_has_leader 1
etcd_server_leader_changes_seen_total 2
etcd_server_proposals_committed_total 120
etcd_server_proposals_applied_total 119
etcd_server_proposals_pending 1
etcd_server_proposals_failed_total 0
etcd_mvcc_db_total_size_in_bytes 20480
etcd_mvcc_db_total_size_in_use_in_bytes 16384
etcd_mvcc_db_total_size_in_bytes_other 99
etcd_server_quota_backend_bytes 2.147483648e+09
process_resident_memory_bytes 3.2858112e+07
process_cpu_seconds_total 0.13
process_open_fds 120
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 1
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 3
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 4
etcd_disk_wal_fsync_duration_seconds_sum 0.004
etcd_disk_wal_fsync_duration_seconds_count 4
etcd_disk_backend_commit_duration_seconds_bucket{le="0.004"} 2
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 7
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 0
grpc_server_handled_total{grpc_code="OK",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Watch",grpc_service="grpc.health.v1.Health",grpc_type="x"} 1
etcd_debugging_mvcc_keys_total 5
etcd_debugging_mvcc_watch_stream_total 3
etcd_debugging_mvcc_watcher_total 6
"""


def test_a_page_becomes_one_row_per_column():
    scrape = parse_scrape(PAGE)
    assert scrape.buckets(FSYNC) == {0.001: 1, 0.002: 3, INF: 4}
    assert scrape.grpc == {("Put", "OK"): 7, ("Put", "Unavailable"): 2, ("Watch", "OK"): 2}
    assert format_grpc(scrape.grpc) == "Put:OK=7;Put:Unavailable=2;Watch:OK=2"
    previous = parse_scrape(PAGE.replace('{le="+Inf"} 4', '{le="+Inf"} 3'))  # one sample above 2 ms since then
    row = dict(zip(COLUMNS, row_fields(1700000000.25, "http://127.0.0.1:2379", scrape, previous), strict=True))
    assert row == {
        "Timestamp": "1700000000.250",
        "Member": "http://127.0.0.1:2379",
        "IsLeader": 1,
        "HasLeader": 1,
        "LeaderChanges": 2,
        "ProposalsCommitted": 120,
        "ProposalsApplied": 119,
        "ProposalsPending": 1,
        "ProposalsFailed": 0,
        "DbSizeBytes": 20480,
        "DbSizeInUseBytes": 16384,
        "QuotaBytes": 2147483648,
        "RssBytes": 32858112,
        "CpuSeconds": 0.13,
        "FsyncP99Ms": "2.000",  # the one new sample is in the +Inf bucket: the highest finite bound
        "BackendCommitP99Ms": "",  # no new sample
        "GrpcRequests": "Put:OK=7;Put:Unavailable=2;Watch:OK=2",
        "Keys": 5,
        "WatchStreams": 3,
        "Watchers": 6,
        "Error": "",
        "PeerRttP99Ms": "",
        "SnapshotSaveP99Ms": "",
        "SlowApplies": "",
        "FsyncBuckets": "0.001=1;0.002=3;inf=4",
        "BackendCommitBuckets": "0.004=2;inf=2",
        "PeerRttBuckets": "",
        "SnapshotSaveBuckets": "",
        "OpenFds": 120,
    }


def test_a_page_without_debugging_metrics_leaves_their_columns_empty():
    page = "\n".join(line for line in PAGE.splitlines() if "debugging" not in line)
    row = dict(zip(COLUMNS, row_fields(0.0, "m", parse_scrape(page), None), strict=True))
    assert row["Keys"] == row["WatchStreams"] == row["Watchers"] == ""
    assert row["FsyncP99Ms"] == ""  # the first scrape has no interval


# -- the pre-flight lines ------------------------------------------------------------------------------------


def test_sizes_are_in_binary_units():
    assert [format_bytes(n) for n in (512, 20480, 1536 * 1024, 2**31)] == ["512 B", "20.0 KiB", "1.5 MiB", "2.0 GiB"]


def test_one_info_line_per_member_and_warnings_past_the_thresholds():
    healthy = MemberReport("http://127.0.0.1:2379", "3.5.1", 20480, 2**31, 1.23, 201)
    assert report_lines(healthy) == [
        (logging.INFO, "etcd http://127.0.0.1:2379: v3.5.1, db 20.0 KiB of 2.0 GiB quota (0.0 %), fsync P99 1.2 ms")
    ]
    slow_and_full = MemberReport("http://n1:2379", "3.5.1", 0.85 * 2**21, 2**21, 14.2, 201)
    [info, fsync, db] = report_lines(slow_and_full)
    assert info == (
        logging.INFO,
        "etcd http://n1:2379: v3.5.1, db 1.7 MiB of 2.0 MiB quota (85.0 %), fsync P99 14.2 ms",
    )
    assert fsync == (
        logging.WARNING,
        "etcd http://n1:2379: fsync P99 14.2 ms exceeds 10 ms: the disk, not etcd, will bound the results "
        "(etcdctl check perf's threshold)",
    )
    assert db[0] == logging.WARNING
    assert db[1].startswith("etcd http://n1:2379: db 1.7 MiB is 85.0 % of its 2.0 MiB quota: writes fail with")
    at_the_limits = MemberReport("http://n1:2379", "3.5.1", 0.8 * 2**21, 2**21, 10.0, 201)
    assert [level for level, _ in report_lines(at_the_limits)] == [logging.INFO]


def test_a_member_report_says_why_a_figure_is_missing():
    endpoint = Endpoint("http://127.0.0.1:2379", secure=False)
    status = MemberStatus(endpoint, 1, 1, 2, "3.5.1", None)
    scrape = parse_scrape(PAGE)
    skipped = member_report(endpoint.url, status, scrape, scrape, None)
    assert skipped.fsync_p99_ms is None and skipped.db_bytes == 20480 and skipped.version == "3.5.1"
    [(_, line)] = report_lines(skipped)
    assert line.endswith("fsync P99 not measured (--etcd-skip-preflight)")
    silent = MemberStatus(endpoint, None, None, 0, "", "UNAVAILABLE")
    unreachable = member_report(endpoint.url, silent, "connection refused", "connection refused", None)
    [(_, line)] = report_lines(unreachable)
    assert line == (
        "etcd http://127.0.0.1:2379: version unknown, db size unknown, fsync P99 not measured "
        "(Status: UNAVAILABLE; metrics: connection refused; --etcd-skip-preflight)"
    )


def test_the_burst_line_says_what_was_written_and_deleted_and_never_0_puts_deleted():
    prefix = "/p/__preflight__/"
    assert burst_line(BurstResult(200, 0.52, None), prefix) == (
        logging.INFO,
        "pre-flight: 200 puts of 64 bytes under '/p/__preflight__/' in 0.52s, deleted; WAL fsync P99 per member:",
    )
    # the first put failed: no "0 puts ... deleted"
    assert burst_line(BurstResult(0, 0.01, "etcdserver: permission denied"), prefix) == (
        logging.WARNING,
        "pre-flight: the write burst under '/p/__preflight__/' failed at its first put (etcdserver: permission "
        "denied); WAL fsync P99 not measured",
    )
    assert burst_line(BurstResult(17, 3.0, "DEADLINE_EXCEEDED", deleted=False), prefix) == (
        logging.WARNING,
        "pre-flight: 17 puts of 64 bytes under '/p/__preflight__/' in 3.00s, then stopped (DEADLINE_EXCEEDED), not "
        "deleted; WAL fsync P99 per member:",
    )
