"""The /metrics reader on prometheus_client's parser: the names and values the poller and the tests look up."""

import math

import pytest

from etcd_users.exposition import Sample, metric_sum, parse_metrics
from etcd_users.members.server_metrics import BACKEND_COMMIT, FSYNC, parse_scrape

# as etcd 3.5 writes them: typed families, a counter without _total, a histogram
TYPED_PAGE = """
# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 2
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 5
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 6
etcd_disk_wal_fsync_duration_seconds_sum 0.0095
etcd_disk_wal_fsync_duration_seconds_count 6
# HELP etcd_server_health_success The total number of successful health checks
# TYPE etcd_server_health_success counter
etcd_server_health_success 4
# HELP etcd_server_leader_changes_seen_total The number of leader changes seen.
# TYPE etcd_server_leader_changes_seen_total counter
etcd_server_leader_changes_seen_total 1
# HELP etcd_server_is_leader Whether or not this member is a leader.
# TYPE etcd_server_is_leader gauge
etcd_server_is_leader 1
# HELP grpc_server_handled_total Total number of RPCs completed on the server.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 12
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 0
"""


def test_histogram_counter_and_gauge_samples_keep_the_names_looked_up():
    samples = parse_metrics(TYPED_PAGE)
    names = [sample.name for sample in samples]
    assert names[:5] == [FSYNC + "_bucket"] * 3 + [FSYNC + "_sum", FSYNC + "_count"]
    assert [sample.labels["le"] for sample in samples[:3]] == ["0.001", "0.002", "+Inf"]
    assert samples[2].value == 6.0 and isinstance(samples[2].value, float)
    # a counter named without _total gets it (prometheus_client's OpenMetrics naming); one with it keeps its name
    assert metric_sum(samples, "etcd_server_health_success_total") == 4
    assert metric_sum(samples, "etcd_server_leader_changes_seen_total") == 1
    assert metric_sum(samples, "etcd_server_is_leader") == 1
    assert metric_sum(samples, "grpc_server_handled_total", grpc_method="Put") == 12
    assert samples[-1] == Sample(
        "grpc_server_handled_total",
        {"grpc_code": "OK", "grpc_method": "Range", "grpc_service": "etcdserverpb.KV", "grpc_type": "unary"},
        0.0,
    )


def test_the_poller_reads_typed_pages():
    scrape = parse_scrape(TYPED_PAGE)
    assert scrape.buckets(FSYNC) == {0.001: 2.0, 0.002: 5.0, math.inf: 6.0}
    assert scrape.buckets(BACKEND_COMMIT) == {}
    assert scrape.values["etcd_server_leader_changes_seen_total"] == 1
    assert scrape.values["etcd_server_is_leader"] == 1
    assert scrape.grpc == {("Put", "OK"): 12.0}  # zero counters are left out


def test_a_bad_line_is_named_with_its_number():
    with pytest.raises(ValueError, match=r"line 4: .*'broken\{x=1\} 2'"):
        parse_metrics("# TYPE a gauge\na 1\n\nbroken{x=1} 2\n")
