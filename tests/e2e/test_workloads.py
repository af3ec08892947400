"""The other workloads (txn, delete, lease, watch, weighted mix), confirmed by the server's own counters."""

from __future__ import annotations

import pytest
from checks import assert_share
from support import headless_args, member_counter, read_csv_rows, run_locust

from etcd_users.exposition import fetch_metrics, metric_sum

pytestmark = pytest.mark.e2e


def run(cluster, out, user_class: str, *args: str, users: int = 4, seconds: int = 3) -> dict[str, dict[str, str]]:
    prefix = out / user_class
    args = ("--etcd-key-space-size", "300", "--etcd-cleanup", *args, user_class)
    result = run_locust(*headless_args(cluster, prefix, *args, users=users, seconds=seconds))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    rows = {row["Name"]: row for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] != "Aggregated"}
    for name, row in rows.items():
        assert int(row["Failure Count"]) == 0, (name, read_csv_rows(f"{prefix}_failures.csv"))
    return rows


def count(rows, name: str) -> int:
    return int(rows[name]["Request Count"])


def received(cluster, method: str) -> float:
    """Messages the members received on a (streaming) method: streams count as handled only when they end."""
    return sum(
        metric_sum(fetch_metrics(url), "grpc_server_msg_received_total", grpc_method=method)
        for url in cluster.metrics_urls
    )


@pytest.mark.slow
def test_txn_put_commits_transactions_of_the_configured_size(fresh_etcd1, tmp_out):
    before = sum(member_counter(fresh_etcd1, "Txn"))
    rows = run(fresh_etcd1, tmp_out, "EtcdTxnPutUser", "--etcd-txn-ops", "4")
    assert set(rows) == {"txn-put"}
    assert sum(member_counter(fresh_etcd1, "Txn")) - before >= count(rows, "txn-put")


@pytest.mark.slow
def test_txn_mixed_reports_reads_and_writes_at_the_ratio(etcd1, tmp_out):
    rows = run(etcd1, tmp_out, "EtcdTxnMixedUser", "--etcd-rw-ratio", "3", "--etcd-txn-ops", "2")
    assert set(rows) == {"txn-mixed-read", "txn-mixed-write"}
    # 3 reads a write: three quarters of the transactions, within what chance allows for the run's own number of them
    reads, total = count(rows, "txn-mixed-read"), count(rows, "txn-mixed-read") + count(rows, "txn-mixed-write")
    assert_share(reads, total, 0.75, "reads of the transactions")


@pytest.mark.slow
def test_delete_removes_what_it_wrote(etcd1, tmp_out):
    before = member_counter(etcd1, "DeleteRange")[0]
    rows = run(etcd1, tmp_out, "EtcdDeleteUser")
    assert set(rows) == {"put", "delete"}
    assert abs(count(rows, "put") - count(rows, "delete")) <= 4  # one pair per user may be cut by the stop
    # the run's deletes plus the clean-up's one
    assert member_counter(etcd1, "DeleteRange")[0] - before >= count(rows, "delete")


@pytest.mark.slow
def test_lease_keepalive_renews_one_lease_per_user(etcd1, tmp_out):
    before = received(etcd1, "LeaseKeepAlive")
    revoked = member_counter(etcd1, "LeaseRevoke")[0]
    rows = run(etcd1, tmp_out, "EtcdLeaseUser", users=3)
    assert count(rows, "lease-grant") == 3
    # revoked as the users stop: after Locust's final CSV, so counted on the server
    assert member_counter(etcd1, "LeaseRevoke")[0] - revoked == 3
    assert received(etcd1, "LeaseKeepAlive") - before >= count(rows, "lease-keepalive") > 0


@pytest.mark.slow
def test_watch_events_match_the_puts_on_watched_keys(etcd3, tmp_out):
    args = ("--etcd-watch-streams", "2", "--etcd-watchers-per-stream", "3", "--etcd-user-rate", "20")
    rows = run(etcd3, tmp_out, "EtcdWatchUser", *args, users=3)
    assert set(rows) == {"put", "watch"}
    assert count(rows, "watch") == 6 * count(rows, "put")
    assert received(etcd3, "Watch") >= 3 * 6  # every watcher was created on the server
    # from the put to its event: a bound only a latency taken from the wrong moment fails, however busy the machine
    assert float(rows["watch"]["Max Response Time"]) < 30_000


@pytest.mark.slow
def test_mixed_user_follows_the_weights(etcd1, tmp_out):
    rows = run(etcd1, tmp_out, "EtcdMixedUser", "--etcd-mix", "put:60,range/serializable:30,txn-put:10")
    assert set(rows) == {"put", "range/serializable", "txn-put"}
    total = sum(count(rows, name) for name in rows)
    for name, weight in (("put", 0.6), ("range/serializable", 0.3), ("txn-put", 0.1)):
        assert_share(count(rows, name), total, weight, name)  # within what chance allows for the run's own total


@pytest.mark.slow
def test_bad_mix_is_one_clear_line():
    args = ("-f", "locustfile.py", "--headless", "-t", "1s", "--etcd-mix", "put:45,scan:55", "EtcdMixedUser")
    result = run_locust(*args, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "locust-etcd: error: --etcd-mix: 'scan:55' is not NAME:WEIGHT" in result.stderr
