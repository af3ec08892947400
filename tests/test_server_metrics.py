"""Server metrics and the pre-flight report: the pure parts, a poller against a real member and a dead port,
then real Locust runs against real clusters (``PREFIX_etcd_metrics.csv``, the pre-flight lines, the quota warning)."""

import locust  # noqa: F401  (gevent patching before anything else loads)

import base64
import json
import logging
import math
import re
import socket
import urllib.request
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import gevent
import pytest
from support import headless_args, read_csv_rows, run_locust

from etcd_users.cluster import LocalCluster
from etcd_users.endpoints import Endpoint, MemberStatus
from etcd_users.options import OPTIONS, SettingsError, settings_from_options
from etcd_users.preflight_report import (
    BURST_PUTS,
    MemberReport,
    format_bytes,
    member_report,
    report_lines,
)
from etcd_users.server_metrics import (
    COLUMNS,
    CSV_SUFFIX,
    FSYNC,
    MetricsPoller,
    Scrape,
    Scraper,
    bucket_delta,
    format_grpc,
    histogram_quantile,
    interval_p99_ms,
    member_urls,
    parse_scrape,
    row_fields,
)

INF = math.inf
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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
    }


def test_a_page_without_debugging_metrics_leaves_their_columns_empty():
    page = "\n".join(line for line in PAGE.splitlines() if "debugging" not in line)
    row = dict(zip(COLUMNS, row_fields(0.0, "m", parse_scrape(page), None), strict=True))
    assert row["Keys"] == row["WatchStreams"] == row["Watchers"] == ""
    assert row["FsyncP99Ms"] == ""  # the first scrape has no interval


# -- options -------------------------------------------------------------------------------------------------


def options(**overrides) -> SimpleNamespace:
    return SimpleNamespace(**{**{option.dest: option.default for option in OPTIONS}, **overrides})


def test_new_options_have_defaults_and_env_vars():
    flags = {option.flag: option for option in OPTIONS}
    assert flags["--etcd-metrics-interval"].default == 5.0
    assert flags["--etcd-metrics-interval"].env_var == "ETCD_METRICS_INTERVAL"
    assert flags["--etcd-metrics-urls"].default == ""
    assert flags["--etcd-skip-preflight"].default is False
    settings = settings_from_options(options(etcd_endpoints="http://127.0.0.1:1,http://127.0.0.1:2"))
    assert member_urls(settings) == [
        ("http://127.0.0.1:1", "http://127.0.0.1:1/metrics"),
        ("http://127.0.0.1:2", "http://127.0.0.1:2/metrics"),
    ]


def test_metrics_urls_are_aligned_with_the_endpoints():
    settings = settings_from_options(
        options(etcd_endpoints="https://10.0.0.1:2379", etcd_metrics_urls="http://10.0.0.1:2381/metrics")
    )
    assert member_urls(settings) == [("https://10.0.0.1:2379", "http://10.0.0.1:2381/metrics")]
    with pytest.raises(SettingsError, match="--etcd-metrics-urls: 2 URLs for 1 --etcd-endpoints"):
        settings_from_options(
            options(etcd_endpoints="http://127.0.0.1:1", etcd_metrics_urls="http://a:1/metrics,http://b:1/metrics")
        )
    with pytest.raises(SettingsError, match="--etcd-metrics-urls: '127.0.0.1:2381' is not a URL"):
        settings_from_options(options(etcd_endpoints="http://127.0.0.1:1", etcd_metrics_urls="127.0.0.1:2381"))
    with pytest.raises(SettingsError, match="--etcd-metrics-interval"):
        settings_from_options(options(etcd_metrics_interval=-1.0))


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


# -- the poller against a real member and a port where nothing listens ---------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_member_that_does_not_answer_gets_an_error_row_and_polling_goes_on(etcd1, tmp_path):
    dead = f"http://127.0.0.1:{closed_port()}"
    members = [(etcd1.endpoints[0], etcd1.metrics_urls[0]), (dead, f"{dead}/metrics")]
    path = tmp_path / "run_etcd_metrics.csv"
    poller = MetricsPoller(members, 0.2, Scraper(1.0), str(path))
    poller.start()
    gevent.sleep(0.5)
    put_via_gateway(etcd1.endpoints[0], "/test-server-metrics-poller", "x" * 100)
    gevent.sleep(0.3)
    poller.stop()
    rows = read_csv_rows(path)
    assert list(rows[0]) == list(COLUMNS)
    by_member = defaultdict(list)
    for row in rows:
        by_member[row["Member"]].append(row)
    assert len(by_member[dead]) >= 4  # start, every 0.2 s, stop
    for row in by_member[dead]:
        assert row["Error"] and "\n" not in row["Error"] and row["DbSizeBytes"] == ""
    live = by_member[etcd1.endpoints[0]]
    assert len(live) == len(by_member[dead])
    assert all(row["Error"] == "" and int(row["DbSizeBytes"]) > 0 and row["IsLeader"] == "1" for row in live)
    assert any(row["FsyncP99Ms"] for row in live[1:])  # the put's fsync, in the interval that saw it
    assert live[0]["FsyncP99Ms"] == ""


# -- real runs -----------------------------------------------------------------------------------------------


def put_via_gateway(endpoint: str, key: str, value: str) -> None:
    """A put through etcd's JSON gateway: no gRPC client in this gevent-patched process."""
    body = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value.encode()).decode()}
    request = urllib.request.Request(f"{endpoint}/v3/kv/put", data=json.dumps(body).encode(), method="POST")
    with _DIRECT.open(request, timeout=10) as response:
        response.read()


def scrape(url: str) -> Scrape:
    return Scraper(5.0).fetch(url)


def run(cluster: LocalCluster, out: Path, *args: str, users: int = 4, seconds: int = 6):
    args = ("--etcd-prefix", "/test-server-metrics/", *args, "EtcdPutUser")
    result = run_locust(*headless_args(cluster, out / "run", *args, users=users, seconds=seconds), timeout=90)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


def preflight_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "etcd_users.preflight_report" in line]


@pytest.mark.slow
def test_a_run_writes_every_member_s_metrics(etcd3, tmp_out):
    result = run(etcd3, tmp_out, "--etcd-metrics-interval", "1", "--etcd-cleanup")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = preflight_lines(result.stderr)
    assert any(f"pre-flight: {BURST_PUTS} puts of 64 bytes under '/test-server-metrics/__preflight__/'" in line
               for line in lines), lines  # fmt: skip
    for endpoint in etcd3.endpoints:
        # the session's cluster holds what earlier tests wrote: the db is KiB or MiB, a small share of the quota
        pattern = rf"INFO/etcd_users\.preflight_report: etcd {endpoint}: v3\.5\.\d+, "
        pattern += r"db [\d.]+ [KM]iB of 2\.0 GiB quota \(\d+\.\d %\), fsync P99 [\d.]+ ms$"
        assert any(re.search(pattern, line) for line in lines), lines

    rows = read_csv_rows(f"{tmp_out / 'run'}{CSV_SUFFIX}")
    assert not [row for row in rows if row["Error"]]
    groups = defaultdict(list)
    for row in rows:
        groups[row["Timestamp"]].append(row)
    assert len(groups) >= 5  # at the start, about every second, at the stop
    for timestamp, group in groups.items():
        assert sorted(row["Member"] for row in group) == sorted(etcd3.endpoints), timestamp
        assert [row["IsLeader"] for row in group].count("1") == 1, group
    for endpoint in etcd3.endpoints:
        mine = [row for row in rows if row["Member"] == endpoint]
        assert int(mine[-1]["ProposalsCommitted"]) > int(mine[0]["ProposalsCommitted"])
        assert all(int(row["DbSizeBytes"]) > 0 and int(row["RssBytes"]) > 0 for row in mine)
        assert all(row["HasLeader"] == "1" and float(row["CpuSeconds"]) > 0 for row in mine)
        assert any(row["FsyncP99Ms"] and float(row["FsyncP99Ms"]) > 0 for row in mine[1:])
        assert "Put:OK=" in mine[-1]["GrpcRequests"]
    # the puts went somewhere: members together handled at least as many as Locust counted
    handled = sum(
        int(re.search(r"Put:OK=(\d+)", row["GrpcRequests"]).group(1))
        for row in rows
        if row["Timestamp"] == max(groups, key=float)
    )
    puts = next(row for row in read_csv_rows(f"{tmp_out / 'run'}_stats.csv") if row["Name"] == "put")
    assert handled >= int(puts["Request Count"])


def fill(cluster: LocalCluster, fraction: float) -> float:
    """Write 8 KiB values outside any run's prefix until the db holds more than ``fraction`` of its quota."""
    [endpoint], [url] = cluster.endpoints, cluster.metrics_urls
    number = 0
    while True:
        gevent.sleep(0.15)  # etcd updates the db size when it commits its batch, every 100 ms
        values = scrape(url).values
        used = values["etcd_mvcc_db_total_size_in_bytes"] / values["etcd_server_quota_backend_bytes"]
        if used > fraction:
            return used
        for _ in range(20 if used < fraction - 0.25 else 3):  # 3 puts: about 1 % of 2 MiB
            put_via_gateway(endpoint, f"/filler/{number:05d}", "f" * 8192)
            number += 1


@pytest.mark.slow
def test_a_db_near_its_quota_is_a_warning_and_gets_no_burst(tmp_out):
    cluster = LocalCluster(1, extra_args=["--quota-backend-bytes", str(2 * 1024 * 1024)])
    cluster.start(timeout=30)
    try:
        used = fill(cluster, 0.83)
        assert used < 0.95
        puts_before = scrape(cluster.metrics_urls[0]).grpc.get(("Put", "OK"), 0)
        slow = ("--etcd-user-rate", "1", "--etcd-val-size", "16")  # a couple of puts: the quota is not reached
        result = run(cluster, tmp_out, *slow, users=1, seconds=1)
        assert result.returncode == 0, result.stderr[-3000:]
        lines = preflight_lines(result.stderr)
        [info] = [line for line in lines if "/INFO/" in line]
        assert info.endswith("fsync P99 not measured (no burst: a db is above 80 % of its quota)"), lines
        [warning] = [line for line in lines if "/WARNING/" in line]
        found = re.search(rf"etcd {cluster.endpoints[0]}: db [\d.]+ MiB is ([\d.]+) % of its 2\.0 MiB quota", warning)
        assert found and 80.0 < float(found.group(1)) < 100.0, warning
        assert scrape(cluster.metrics_urls[0]).grpc.get(("Put", "OK"), 0) - puts_before < 20  # the run's few
    finally:
        cluster.stop()


@pytest.mark.slow
def test_skip_preflight_writes_nothing_but_still_reports(etcd1, tmp_out):
    puts_before = scrape(etcd1.metrics_urls[0]).grpc.get(("Put", "OK"), 0)
    slow = ("--etcd-user-rate", "1", "--etcd-val-size", "16", "--etcd-skip-preflight", "--etcd-cleanup")
    result = run(etcd1, tmp_out, *slow, users=1, seconds=1)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = preflight_lines(result.stderr)
    assert not [line for line in lines if "pre-flight:" in line], lines
    [info] = lines
    assert re.search(rf"etcd {etcd1.endpoints[0]}: v3\.5\.\d+, db .* quota .*, fsync P99 not measured "
                     r"\(--etcd-skip-preflight\)$", info)  # fmt: skip
    assert scrape(etcd1.metrics_urls[0]).grpc.get(("Put", "OK"), 0) - puts_before < 20  # not the burst's 200
