"""Server metrics and the pre-flight report against real members: a poller against a live member and a dead
port, then real Locust runs against real clusters (``PREFIX_etcd_metrics.csv``, the pre-flight lines, the quota
warning). The pure parts are ``tests/unit/test_server_metrics.py``."""

import base64
import json
import re
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import gevent
import pytest
from support import free_port, headless_args, read_csv_rows, run_locust

from etcd_users.local import LocalCluster
from etcd_users.members.preflight import BURST_PUTS, format_bytes
from etcd_users.members.server_metrics import COLUMNS, CSV_SUFFIX, MetricsPoller, Scrape, Scraper

pytestmark = pytest.mark.e2e

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# -- the poller against a real member and a port where nothing listens ---------------------------------------


def test_a_member_that_does_not_answer_gets_an_error_row_and_polling_goes_on(etcd1, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    members = [(etcd1.endpoints[0], etcd1.metrics_urls[0]), (dead, f"{dead}/metrics")]
    path = tmp_path / "run_etcd_metrics.csv"
    poller = MetricsPoller(members, 0.2, Scraper(1.0), str(path))
    poller.start()
    # polls (every 0.2 s) before and after the put, however long each takes on this machine: the file shows them
    polled_until(path, dead, 2)
    put_via_gateway(etcd1.endpoints[0], "/test-server-metrics-poller", "x" * 100)
    polled_until(path, dead, len(rows_of(path, dead)) + 2)
    poller.stop()
    rows = read_csv_rows(path)
    assert list(rows[0]) == list(COLUMNS)
    by_member = defaultdict(list)
    for row in rows:
        by_member[row["Member"]].append(row)
    assert len(by_member[dead]) >= 5  # start, the polls waited for, stop
    for row in by_member[dead]:
        assert row["Error"] and "\n" not in row["Error"] and row["DbSizeBytes"] == ""
    live = by_member[etcd1.endpoints[0]]
    assert len(live) == len(by_member[dead])
    assert all(row["Error"] == "" and int(row["DbSizeBytes"]) > 0 and row["IsLeader"] == "1" for row in live)
    assert any(row["FsyncP99Ms"] for row in live[1:])  # the put's fsync, in the interval that saw it
    assert live[0]["FsyncP99Ms"] == ""


def rows_of(path: Path, member: str) -> list[dict[str, str]]:
    return [row for row in read_csv_rows(path) if row["Member"] == member] if path.exists() else []


def polled_until(path: Path, member: str, rows: int, timeout: float = 30) -> None:
    """Until ``path`` has ``rows`` rows of ``member`` (the poller writes a row per member per poll)."""
    deadline = time.monotonic() + timeout
    while len(rows_of(path, member)) < rows:
        assert time.monotonic() < deadline, f"fewer than {rows} polls of {member} within {timeout:g}s"
        gevent.sleep(0.05)


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
    return [line for line in stderr.splitlines() if "etcd_users.monitoring.preflight" in line]


@pytest.mark.slow
def test_a_run_writes_every_member_s_metrics(etcd3, tmp_out):
    result = run(etcd3, tmp_out, "--etcd-metrics-interval", "1", "--etcd-cleanup")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = preflight_lines(result.stderr)
    assert any(f"pre-flight: {BURST_PUTS} puts of 64 bytes under '/test-server-metrics/__preflight__/'" in line
               for line in lines), lines  # fmt: skip
    for endpoint in etcd3.endpoints:
        # the session's cluster holds what earlier tests wrote: the db is KiB or MiB, a small share of the quota (the
        # local etcd's: 8 GiB, or half the free disk)
        pattern = rf"INFO/etcd_users\.monitoring\.preflight: etcd {endpoint}: v3\.5\.\d+, "
        pattern += rf"db [\d.]+ [KM]iB of {re.escape(format_bytes(etcd3.quota_bytes))} quota \(\d+\.\d %\), "
        pattern += r"fsync P99 [\d.]+ ms$"
        assert any(re.search(pattern, line) for line in lines), lines

    rows = read_csv_rows(f"{tmp_out / 'run'}{CSV_SUFFIX}")
    assert not [row for row in rows if row["Error"]]
    groups = defaultdict(list)
    for row in rows:
        groups[row["Timestamp"]].append(row)
    # at the start, at the stop and about every second between, over the run's own seconds (a busy machine may delay
    # a poll: half of them is a bound only a poller that stopped fails)
    seconds = max(map(float, groups)) - min(map(float, groups))
    assert len(groups) >= 2 + seconds / 2 - 1, (len(groups), seconds)
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
        result = run(cluster, tmp_out, *slow, users=1, seconds=3)
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
    result = run(etcd1, tmp_out, *slow, users=1, seconds=3)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = preflight_lines(result.stderr)
    assert not [line for line in lines if "pre-flight:" in line], lines
    [info] = lines
    assert re.search(rf"etcd {etcd1.endpoints[0]}: v3\.5\.\d+, db .* quota .*, fsync P99 not measured "
                     r"\(--etcd-skip-preflight\)$", info)  # fmt: skip
    assert scrape(etcd1.metrics_urls[0]).grpc.get(("Put", "OK"), 0) - puts_before < 20  # not the burst's 200
