"""The ready workloads end to end: real Locust subprocesses against real etcd members on 127.0.0.1."""

from __future__ import annotations

import etcd3
import pytest
from checks import stats_rows
from support import HEADLESS, headless_args, member_counter, run_locust

from etcd_users.local import LocalCluster

pytestmark = pytest.mark.e2e


def run_workload(cluster: LocalCluster, out, *args: str, users: int = 8, seconds: int = 3, cleanup: bool = True):
    """A headless run; with ``cleanup`` it leaves the shared cluster's prefix empty for the next test."""
    prefix = out / "run"
    cleanup_args = ("--etcd-cleanup",) if cleanup else ()
    result = run_locust(*headless_args(cluster, prefix, *cleanup_args, *args, users=users, seconds=seconds))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return stats_rows(prefix)


def assert_clean_rows(rows: dict[str, dict[str, str]], names: set[str]) -> None:
    assert set(rows) == names
    for name, row in rows.items():
        assert row["Type"] == "etcd"
        assert int(row["Request Count"]) > 0, name
        assert int(row["Failure Count"]) == 0, name


@pytest.mark.slow
@pytest.mark.parametrize("cluster_fixture", ["etcd1", "etcd3"])
def test_put_and_both_range_consistencies_side_by_side(cluster_fixture, request, tmp_out):
    cluster = request.getfixturevalue(cluster_fixture)
    classes = ("EtcdPutUser", "LinearizableRangeUser", "SerializableRangeUser")
    rows = run_workload(cluster, tmp_out, *classes, "--etcd-key-space-size", "1000", users=6)
    assert_clean_rows(rows, {"put", "range/linearizable", "range/serializable"})


@pytest.mark.slow
@pytest.mark.parametrize("consistency, name", [("l", "range/linearizable"), ("s", "range/serializable")])
def test_range_user_takes_consistency_from_the_option(etcd1, tmp_out, consistency, name):
    args = ("--etcd-consistency", consistency, "--etcd-key-space-size", "1000")
    rows = run_workload(etcd1, tmp_out, "EtcdRangeUser", *args, seconds=2)
    assert_clean_rows(rows, {name})


@pytest.mark.slow
def test_range_reads_find_their_keys(fresh_etcd1, tmp_out):
    args = ("--etcd-key-space-size", "500")
    rows = run_workload(fresh_etcd1, tmp_out, "SerializableRangeUser", *args, seconds=2, cleanup=False)
    reads = int(rows["range/serializable"]["Request Count"])
    # every read found one key of the populated key space: response messages carry a kv, not just a header
    assert float(rows["range/serializable"]["Average Content Size"]) > 1024
    client = etcd3.client(host="127.0.0.1", port=int(fresh_etcd1.endpoints[0].rsplit(":", 1)[1]))
    assert client.get_prefix_response("/locust-etcd/", count_only=True).count == 500
    assert reads > 0


@pytest.mark.slow
def test_leader_target_sends_every_put_to_the_leader(etcd3, tmp_out):
    leader = etcd3.leader_index()
    before = member_counter(etcd3, "Put")
    rows = run_workload(etcd3, tmp_out, "EtcdPutUser", "--etcd-target", "leader", "--etcd-conns", "2")
    after = member_counter(etcd3, "Put")
    puts = int(rows["put"]["Request Count"])
    handled = [a - b for a, b in zip(after, before, strict=True)]
    assert handled[leader] >= puts
    assert sum(handled) - handled[leader] == 0, handled


@pytest.mark.slow
def test_round_robin_spreads_reads_evenly_over_members(etcd3, tmp_out):
    before = member_counter(etcd3, "Range")
    args = ("--etcd-target", "round-robin", "--etcd-key-space-size", "1000")
    rows = run_workload(etcd3, tmp_out, "SerializableRangeUser", *args)
    after = member_counter(etcd3, "Range")
    reads = int(rows["range/serializable"]["Request Count"])
    handled = [a - b for a, b in zip(after, before, strict=True)]
    assert sum(handled) >= reads
    for count in handled:
        assert abs(count - sum(handled) / 3) <= 0.2 * sum(handled) / 3, handled


@pytest.mark.slow
def test_keys_have_the_configured_sizes_and_stay_under_the_prefix(fresh_etcd1, tmp_out):
    client = etcd3.client(host="127.0.0.1", port=int(fresh_etcd1.endpoints[0].rsplit(":", 1)[1]))
    client.put("/other/untouched", "before")
    args = ("--etcd-prefix", "/bench/", "--etcd-key-size", "40", "--etcd-val-size", "300")
    args = (*args, "--etcd-key-space-size", "100")
    rows = run_workload(fresh_etcd1, tmp_out, "EtcdPutUser", *args, seconds=2, cleanup=False)
    assert int(rows["put"]["Request Count"]) > 0
    everything = list(client.get_all())
    written = [(value, meta.key) for value, meta in everything if meta.key != b"/other/untouched"]
    assert 0 < len(written) <= 100
    for value, key in written:
        assert key.startswith(b"/bench/") and len(key) == 40, key
        assert len(value) == 300
    assert client.get("/other/untouched")[0] == b"before"


BAD_INPUT = [
    (
        ("--etcd-endpoints", "http://127.0.0.1:1"),
        "no etcd endpoint answered within 2s (http://127.0.0.1:1: UNAVAILABLE",
    ),
    (("--etcd-endpoints", "127.0.0.1:2379"), "--etcd-endpoints: '127.0.0.1:2379' is not a client URL"),
    (("--etcd-endpoints", "ftp://127.0.0.1:2379"), "write http://HOST:PORT or https://HOST:PORT"),
    (("--etcd-key-size", "12"), "--etcd-key-size: 12 is too small for the prefix '/locust-etcd/' (13 bytes)"),
    (("--etcd-target", "follower"), "--etcd-target: 'follower' is not one of: round-robin, leader"),
    (("--etcd-prefix", "/"), "--etcd-prefix: '/' would cover the whole key space"),
    (("--etcd-user", "root"), "--etcd-user: expected NAME:PASSWORD"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", BAD_INPUT, ids=[" ".join(args) for args, _ in BAD_INPUT])
def test_bad_input_is_one_clear_line(args, message):
    result = run_locust(*HEADLESS, "-u", "1", "-t", "2s", "--etcd-timeout", "2", *args, "EtcdPutUser", timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("locust-etcd: error: ")
    assert message in errors[0]
