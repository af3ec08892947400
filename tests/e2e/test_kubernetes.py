"""Kubernetes-shaped traffic (EtcdKubernetesUser, EtcdKubernetesNodeUser) on a real 3-member etcd, confirmed by the
members' own counters: the mix of Txn, Range and Watch, paged lists, conflicts counted apart from etcd's errors, watch
events of the run's writes, a watch that resumes across a killed member without a relist, nothing written outside the
prefix, and compaction only where it is allowed."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
from certs import etcd_client
from checks import assert_no_traceback, assert_share, failure_labels, stats_rows
from support import HEADLESS, headless_args, member_counter, read_csv_rows, run_locust, running, start_locust

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.local import ClusterError, LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONFLICT = "k8s: conflict"


def run(cluster, out, prefix: str, *args: str, users: int = 6, seconds: int = 5, classes=("EtcdKubernetesUser",)):
    command = headless_args(
        cluster, out / "run", "--etcd-prefix", prefix, "--etcd-cleanup", *args, *classes, users=users, seconds=seconds
    )
    result = run_locust(*command, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: conflicts are Locust failures
    assert_no_traceback(result.stdout + result.stderr)
    rows = stats_rows(out / "run")
    labels = failure_labels(out / "run")
    assert set(labels) <= {CONFLICT}, labels  # etcd answered every request
    assert result.returncode == (1 if labels else 0)
    return rows, labels, result


def count(rows, name: str) -> int:
    return int(rows[name]["Request Count"]) if name in rows else 0


def writes(rows) -> int:
    return sum(count(rows, name) for name in ("k8s/create", "k8s/update", "k8s/delete"))


def watch_messages(cluster, kind: str) -> float:
    """Watch messages the members received (watcher creations) or sent (created, events): streams count as handled
    only when they end."""
    return sum(
        metric_sum(fetch_metrics(url), f"grpc_server_msg_{kind}_total", grpc_method="Watch")
        for url in cluster.metrics_urls
    )


def assert_renewals(out: Path, rows, nodes: int, period: float) -> None:
    """Every node's lease renewed once a period: as many renewals as ``nodes`` per period over the time between the
    run's own first and last renewal (``_latency.csv``), give or take one round of them at each end. Late renewals are
    caught up, so a busy machine changes when they happen, not how many."""
    latency_rows = read_csv_rows(f"{out / 'run'}_latency.csv")
    [latency] = [row for row in latency_rows if row["Name"] == "k8s/lease-renew" and row["Series"] == "service"]
    span = float(latency["Last"]) - float(latency["First"])
    renewals = count(rows, "k8s/lease-renew")
    expected = nodes * span / period
    print(f"\n{renewals} lease renewals in {span:.2f} s; {expected:.0f} due")
    assert span > period and expected - 2 * nodes <= renewals <= expected + 2 * nodes, (renewals, span, expected)


def enough_samples_band(base: float, samples: int) -> float:
    """``base`` around an expected ratio for 100 samples or more; wider, as a standard error, for fewer (a slow
    machine's short run), so that the band follows the run's own count, not a guess at the machine's speed."""
    return base * max(1.0, math.sqrt(100 / max(samples, 1)))


def counters(cluster) -> dict[str, float]:
    return {
        "Txn": sum(member_counter(cluster, "Txn")),
        "Range": sum(member_counter(cluster, "Range")),
        "Compact": sum(member_counter(cluster, "Compact")),
        "watch-received": watch_messages(cluster, "received"),
        "watch-sent": watch_messages(cluster, "sent"),
    }


def test_kubernetes_traffic_reaches_the_members_in_its_proportions(etcd3, tmp_out):
    prefix = "/locust-etcd-k8s-mix/"
    client = etcd_client(etcd3.endpoints[0])
    sentinels = {
        b"/locust-etcd-k8s-mix": b"the prefix without its slash",
        b"/locust-etcd-k8s-mix0": bytes(range(256)),
        b"/registry/pods/default/web-0": b"\x00a pod of a real cluster\xff",
    }
    for key, value in sentinels.items():
        client.put(key, value)
    before_keys = {key: client.get(key) for key in sentinels}
    before = counters(etcd3)

    objects = {"pods": 300, "configmaps": 60, "leases": 20}
    rows, _, result = run(
        etcd3,
        tmp_out,
        prefix,
        "--etcd-k8s-objects",
        ",".join(f"{resource}:{number}" for resource, number in objects.items()),
        "--etcd-k8s-page-size",
        "50",
        "--etcd-k8s-object-size",
        "256:1024",
        "--etcd-k8s-nodes",
        "40",
        "--etcd-k8s-lease-period",
        "1",
        users=8,
        classes=("EtcdKubernetesUser", "EtcdKubernetesNodeUser"),
    )
    after = counters(etcd3)

    # every operation of the mixes ran, under its name
    assert {"k8s/get", "k8s/get-stale", "k8s/get-at-rev", "k8s/list", "k8s/list-stale", "k8s/update"} <= set(rows)
    assert {"k8s/watch", "k8s/lease-renew"} <= set(rows)
    # the objects were written first, and not measured
    assert "kubernetes prefill: 0 objects existed" in result.stderr and f"{sum(objects.values()) + 40} written" in (
        result.stderr
    )
    # Txn: the prefill's creates, the run's writes and lease renewals (each a compare-and-write)
    prefilled = sum(objects.values()) + 40
    run_txns = after["Txn"] - before["Txn"] - prefilled
    measured = writes(rows) + count(rows, "k8s/lease-renew")
    # + the writes cut by the stop: at most one in flight per user and per node
    assert measured <= run_txns <= measured + 8 + 40, (run_txns, measured)
    # the update share of the write mix (90 %), within what chance allows for the run's own number of writes
    assert_share(count(rows, "k8s/update"), writes(rows), 0.9, "updates of the writes")
    # Range: one per get, list page and count; as many read operations as writes (rw-ratio 1), and a list of a
    # resource (picked uniformly) takes 6, 2 or 1 pages: about 0.15 + 0.85 * 3 = 2.7 Ranges per write
    ranges = sum(count(rows, name) for name in rows if name.startswith(("k8s/get", "k8s/list", "k8s/count")))
    assert ranges <= after["Range"] - before["Range"]
    # (1.8 to 3.8 with 100 writes or more; wider, by the standard error, for a slow machine's fewer)
    band = enough_samples_band(1.0, writes(rows))
    assert abs(ranges / writes(rows) - 2.8) < band, (ranges, writes(rows), band)
    # Watch: one watcher per resource for the process, created once; an event per successful write
    assert 3 <= after["watch-received"] - before["watch-received"] <= 6
    assert after["watch-sent"] - before["watch-sent"] > 3
    succeeded = measured - sum(int(rows[name]["Failure Count"]) for name in rows)
    # the events of the writes just before the stop may still be on their way (more of them on a busy machine): half
    # is a bound that only a watch that misses events fails
    assert 0.5 * succeeded <= count(rows, "k8s/watch") <= succeeded + 8 + 40, (count(rows, "k8s/watch"), succeeded)
    # node heartbeats: 40 leases every second
    assert_renewals(tmp_out, rows, nodes=40, period=1)
    # and outside the prefix, nothing changed: value, revisions, version
    for key, (value, metadata) in before_keys.items():
        now_value, now_metadata = client.get(key)
        assert now_value == value == sentinels[key]
        assert (now_metadata.mod_revision, now_metadata.version) == (metadata.mod_revision, metadata.version)
    assert client.get_prefix_response(prefix.encode(), count_only=True).count == 0  # --etcd-cleanup


def test_a_list_larger_than_a_page_takes_several_pages_and_compaction_waits_to_be_allowed(etcd3, tmp_out):
    before = counters(etcd3)
    # 120 pods in pages of 50: 3 pages a list; as many lists as writes
    rows, _, result = run(
        etcd3,
        tmp_out,
        "/locust-etcd-k8s-pages/",
        "--etcd-k8s-objects",
        "pods:120",
        "--etcd-k8s-page-size",
        "50",
        "--etcd-k8s-object-size",
        "512",
        "--etcd-k8s-read-mix",
        "list-stale:1",
        "--etcd-k8s-compact-interval",
        "1",
    )
    after = counters(etcd3)
    assert set(rows) >= {"k8s/list-stale", "k8s/update"} and "k8s/list" not in rows
    # 3 pages a list: the lists are a third of the pages (give or take one cut by the stop per user) and, at rw-ratio 1,
    # about half of the operations, within what chance allows for the run's own number of them
    lists = count(rows, "k8s/list-stale") / 3
    assert_share(lists, lists + writes(rows), 0.5, "lists of the operations")
    # the endpoints were given: not the tool's cluster to compact
    assert after["Compact"] == before["Compact"]
    assert "--etcd-k8s-compact-allowed" in result.stderr


def test_racing_updates_are_conflicts_not_errors_and_compaction_runs_when_allowed(etcd3, tmp_out):
    before = counters(etcd3)
    rows, labels, result = run(
        etcd3,
        tmp_out,
        "/locust-etcd-k8s-race/",
        "--etcd-k8s-objects",
        "pods:2",
        "--etcd-k8s-object-size",
        "128",
        "--etcd-k8s-write-mix",
        "update:1",
        "--etcd-k8s-read-mix",
        "list-and-watch:1,count:1",
        "--etcd-k8s-rw-ratio",
        "0.1",
        "--etcd-k8s-compact-interval",
        "1",
        "--etcd-k8s-compact-allowed",
        users=8,
        seconds=4,
    )
    after = counters(etcd3)
    assert set(rows) == {"k8s/update", "k8s/list", "k8s/count", "k8s/watch"}
    conflicts = int(rows["k8s/update"]["Failure Count"])
    # 8 users race to update 2 objects: conflicts happen at any speed (how many depends on the machine's timing)
    assert labels == {CONFLICT: conflicts} and conflicts > 0
    # a conflict re-reads the object: the next update of it compares the current revision and goes through
    assert count(rows, "k8s/update") - conflicts > conflicts / 4
    # the Txns the members handled: the 2 creates of the prefill and every update, conflicting or not
    assert count(rows, "k8s/update") + 2 <= after["Txn"] - before["Txn"] <= count(rows, "k8s/update") + 2 + 8
    # every successful update made an event (those of the last updates may still be on their way at the stop)
    assert count(rows, "k8s/watch") >= 0.5 * (count(rows, "k8s/update") - conflicts)
    # compacted while the run went on (every second: how many times fit in the run is the machine's business), as
    # many times as the run says it did
    compactions = re.search(r"etcd compaction: (\d+) compactions?, the last at revision (\d+)", result.stderr)
    assert compactions is not None and int(compactions[1]) >= 1, result.stderr[-2000:]
    assert after["Compact"] - before["Compact"] == int(compactions[1]), (after, before, compactions[0])


def test_a_second_run_writes_only_the_missing_objects(etcd1, tmp_out):
    prefix = "/locust-etcd-k8s-resume/"
    args = (
        "--etcd-k8s-objects",
        "pods:40,leases:10",
        "--etcd-k8s-write-mix",
        "update:1",
        "--etcd-k8s-object-size",
        "64",
    )
    first = run_locust(*headless_args(etcd1, tmp_out / "first", "--etcd-prefix", prefix, *args, "EtcdKubernetesUser"))
    assert first.returncode in (0, 1), first.stderr[-3000:]  # 1: conflicts
    assert f"kubernetes prefill: 0 objects existed under '{prefix}', 50 written" in first.stderr
    client = etcd_client(etcd1.endpoints[0])
    client.delete(prefix + "pods/ns-0003/pods-000003")
    _, _, second = run(etcd1, tmp_out, prefix, "--etcd-allow-existing", *args, users=2, seconds=2)
    assert f"kubernetes prefill: 49 objects existed under '{prefix}', 1 written" in second.stderr


def test_one_node_user_renews_every_lease_once_a_period_across_processes(etcd3, tmp_out):
    rows, labels, _ = run(
        etcd3,
        tmp_out,
        "/locust-etcd-k8s-nodes/",
        "--processes",
        "2",
        "--etcd-k8s-objects",
        "pods:50",
        "--etcd-k8s-object-size",
        "256",
        "--etcd-k8s-nodes",
        "60",
        "--etcd-k8s-lease-period",
        "1",
        classes=("EtcdKubernetesUser", "EtcdKubernetesNodeUser"),
        users=4,
        seconds=5,
    )
    # one node user in the whole run (fixed_count), whatever the workers: no lease is renewed twice (no conflict)
    assert int(rows["k8s/lease-renew"]["Failure Count"]) == 0, labels
    assert_renewals(tmp_out, rows, nodes=60, period=1)  # 60 a second
    assert count(rows, "k8s/update") > 0


def test_the_local_etcd_the_tool_started_is_compacted_without_asking(tmp_out):
    command = [
        *HEADLESS,
        *("-u", "2", "-r", "2", "-t", "4s", "--csv", str(tmp_out / "run")),
        *("--etcd-k8s-objects", "pods:20", "--etcd-k8s-object-size", "64", "--etcd-k8s-compact-interval", "1"),
        "EtcdKubernetesUser",
    ]
    result = run_locust(*command, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    assert "kubernetes compaction: every 1s" in result.stderr
    compactions = re.search(r"etcd compaction: (\d+) compactions?, the last at revision (\d+)", result.stderr)
    # compacted while the run went on (every second: how many times fit in the run is the machine's business)
    assert compactions is not None and int(compactions[1]) >= 1 and int(compactions[2]) > 0, result.stderr[-2000:]


def open_watch_streams(url: str) -> float:
    """Watch streams a member serves now: those started less those it has handled to their end."""
    samples = fetch_metrics(url)
    started = metric_sum(samples, "grpc_server_started_total", grpc_method="Watch")
    return started - metric_sum(samples, "grpc_server_handled_total", grpc_method="Watch")


def test_a_watch_across_a_killed_member_resumes_from_its_last_revision_without_a_relist(tmp_out):
    # a cluster of its own, without auto-compaction: a resumed watch finds its revision, and only a relist would show
    with running(LocalCluster(3, auto_compaction_retention=None)) as cluster:
        args = ("--etcd-prefix", "/locust-etcd-k8s-resume/", "--etcd-k8s-objects", "pods:50")
        mix = ("--etcd-k8s-object-size", "128", "--etcd-k8s-read-mix", "list-and-watch:1,get:1")
        mix += ("--exit-code-on-error", "0")  # the requests in flight on the killed member fail
        command = headless_args(cluster, tmp_out / "run", *args, *mix, "EtcdKubernetesUser", users=2, seconds=14)
        with start_locust(*command, log_dir=tmp_out) as locust:
            # the process's one stream, once open: on the member that serves it
            deadline = time.monotonic() + 30
            while not (serving := [i for i, url in enumerate(cluster.metrics_urls) if open_watch_streams(url) >= 1]):
                assert locust.poll() is None and time.monotonic() < deadline, locust.output()[1][-3000:]
                time.sleep(0.2)
            time.sleep(1.0)  # events of the run's writes on it before the kill
            [member] = serving
            cluster.kill_member(member)
            time.sleep(2.0)
            try:
                cluster.start_member(member)
            except ClusterError:  # etcd 3.5 sometimes ends at its first start after a SIGKILL: once more
                cluster.start_member(member)
            result = locust.finish(timeout=90)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_out / "run_audit.json").read_text())
    watches = record["watches"]
    print(f"\n{record['line']}")
    # the stream broke with its member and went on on another, each watcher from the revision after its last event,
    # as kube-apiserver's reflector resumes: nothing out of order or delivered twice, and no list again
    assert watches["resumed"] >= 1 and watches["relisted"] == 0, watches
    assert [watches[name] for name in ("repeated", "disordered", "split")] == [0, 0, 0], watches
    assert f"({watches['resumed']} streams resumed after they broke)" in record["line"]
    assert "relists" not in record["line"]
    rows = stats_rows(tmp_out / "run")
    assert int(rows["k8s/watch"]["Request Count"]) > 0 and int(rows["k8s/watch"]["Failure Count"]) == 0, rows
