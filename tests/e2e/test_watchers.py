"""EtcdWatcherUser end to end: prefix watchers on real etcd, writers in another run or the same one."""

from __future__ import annotations

import json
import re
import time

import etcd3
import pytest
from checks import failure_labels, stats_rows
from support import HEADLESS, headless_args, run_locust, start_locust

pytestmark = pytest.mark.e2e

LINE = re.compile(
    r"watchers: (?P<watchers>\d+) watchers, (?P<events>\d+) events .*behind: P50 \d+ P99 \d+ max (?P<max>\d+) "
    r"revisions, (?P<behind>\d+) watchers behind"
)


def last_line(text: str) -> dict[str, int] | None:
    found = LINE.findall(text)
    if not found:
        return None
    return dict(zip(("watchers", "events", "max", "behind"), map(int, found[-1]), strict=True))


@pytest.mark.slow
def test_a_thousand_prefix_watchers_see_every_put_of_another_run(etcd1, tmp_out):
    prefix = "/watchers-fan-out/"
    # the key space alone: another run's pre-flight writes under the prefix too, outside the key space
    keys = ("--etcd-key-space-size", "100")
    watching = ("EtcdWatcherUser", "--etcd-prefix", prefix, "--etcd-cleanup", *keys, "--etcd-watch-keys", "100")
    fan_out = ("--etcd-watch-streams", "4", "--etcd-watchers-per-stream", "25")
    endpoints = ("--etcd-endpoints", ",".join(etcd1.endpoints))
    with start_locust(*HEADLESS, "-u", "10", "-r", "10", *endpoints, *watching, *fan_out, log_dir=tmp_out) as watchers:
        deadline = time.monotonic() + 90
        while (line := last_line(watchers.output()[1])) is None or line["watchers"] < 1000:
            assert watchers.poll() is None and time.monotonic() < deadline, watchers.output()[1][-3000:]
            time.sleep(0.5)
        writer = tmp_out / "writer"
        args = ("EtcdPutUser", "--etcd-prefix", prefix, "--etcd-user-rate", "10", *keys)
        result = run_locust(*headless_args(etcd1, writer, *args, users=2, seconds=2))
        assert result.returncode == 0, result.stderr[-3000:]
        reported = int(stats_rows(writer)["put"]["Request Count"])
        # a put the run's stop cut short is applied all the same: etcd's keys' versions count every one
        client = etcd3.client(host="127.0.0.1", port=int(etcd1.endpoints[0].rsplit(":", 1)[1]))
        puts = sum(meta.version for _, meta in client.get_prefix(prefix))
        assert 0 < reported <= puts
        # the events still on their way are waited for, however slow the machine: the count is what is judged
        while (line := last_line(watchers.output()[1]))["events"] < puts * 1000 and time.monotonic() < deadline + 60:
            time.sleep(0.5)
        watchers.interrupt()
        done = watchers.finish()
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert line == {"watchers": 1000, "events": puts * 1000, "max": line["max"], "behind": line["behind"]}


@pytest.mark.slow
def test_slow_consumers_fall_behind_in_revisions(etcd1, tmp_out):
    classes = ("EtcdPutUser", "EtcdWatcherUser", "--etcd-prefix", "/watchers-slow/", "--etcd-cleanup")
    slow = ("--etcd-watch-consume-delay", "0.05", "--etcd-watch-slow-fraction", "0.5", "--etcd-user-rate", "50")
    fan_out = ("--etcd-watch-streams", "2", "--etcd-watchers-per-stream", "5")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *classes, *slow, *fan_out, users=4, seconds=3))
    assert result.returncode == 0, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line is not None, result.stderr[-3000:]
    assert line["watchers"] == 20
    # the slow streams' watchers (half of them) read 20 events a second of the 100 written: behind
    assert line["behind"] >= 10 and line["max"] > 0
    rows = stats_rows(tmp_out / "run")
    assert int(rows["watch/event"]["Request Count"]) > 0 and int(rows["watch/event"]["Failure Count"]) == 0


@pytest.mark.slow
def test_a_watcher_on_compacted_history_is_counted_under_etcds_reason(fresh_etcd1, tmp_out):
    client = etcd3.client(host="127.0.0.1", port=int(fresh_etcd1.endpoints[0].rsplit(":", 1)[1]))
    for index in range(20):
        client.put(f"/locust-etcd/{index}", "v")
    revision = client.get_prefix_response("/locust-etcd/", count_only=True).header.revision
    client.compact(revision)
    args = ("EtcdWatcherUser", "--etcd-allow-existing", "--etcd-watch-start-rev", "1")
    fan_out = ("--etcd-watch-streams", "1", "--etcd-watchers-per-stream", "3")
    result = run_locust(*headless_args(fresh_etcd1, tmp_out / "run", *args, *fan_out, users=1, seconds=2))
    assert result.returncode == 1, result.stderr[-3000:]  # failures were counted
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert failure_labels(tmp_out / "run") == {"mvcc: required revision has been compacted": 3}
    assert "cancelled: mvcc: required revision has been compacted 3" in result.stderr


@pytest.mark.slow
def test_a_hundred_thousand_watchers_on_two_hundred_streams_count_every_event(etcd1, tmp_out):
    prefix, puts = "/watchers-hundred-thousand/", 3
    watching = ("EtcdWatcherUser", "--etcd-prefix", prefix, "--etcd-cleanup", "--csv", str(tmp_out / "watch"))
    fan_out = ("--etcd-watch-streams", "50", "--etcd-watchers-per-stream", "500")  # 4 users: 200 streams
    endpoints = ("--etcd-endpoints", ",".join(etcd1.endpoints))
    with start_locust(*HEADLESS, "-u", "4", "-r", "4", *endpoints, *watching, *fan_out, log_dir=tmp_out) as watchers:
        deadline = time.monotonic() + 240
        while (line := last_line(watchers.output()[1])) is None or line["watchers"] < 100_000:
            assert watchers.poll() is None and time.monotonic() < deadline, watchers.output()[1][-3000:]
            time.sleep(0.5)
        client = etcd3.client(host="127.0.0.1", port=int(etcd1.endpoints[0].rsplit(":", 1)[1]))
        for index in range(puts):
            client.put(f"{prefix}{index}", "v")
        # however slow the machine, the events on their way are waited for: the count is what is judged
        while (line := last_line(watchers.output()[1]))["events"] < puts * 100_000 and time.monotonic() < deadline:
            time.sleep(0.5)
        watchers.interrupt()
        done = watchers.finish()
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert line["watchers"] == 100_000 and line["events"] == puts * 100_000
    watch = json.loads((tmp_out / "watch_summary.json").read_text())["watch"]
    assert (watch["watchers"], watch["events"]) == (100_000, puts * 100_000)
    assert watch["event_intervals"] >= watch["busy_intervals"] >= 0
    assert watch["client_bound"] == (2 * watch["busy_intervals"] >= watch["event_intervals"] > 0)


@pytest.mark.slow
def test_a_watch_run_with_a_client_to_spare_is_not_client_bound(etcd1, tmp_out):
    args = ("EtcdWatchUser", "--etcd-prefix", "/watchers-idle/", "--etcd-cleanup", "--etcd-user-rate", "2")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *args, users=2, seconds=8))
    assert result.returncode == 0, result.stderr[-3000:]
    watch = json.loads((tmp_out / "run_summary.json").read_text())["watch"]
    # the fan-out's events are its watch rows: the intervals in which they came are counted, few if any busy (a
    # start-up on a loaded machine may be)
    assert watch["event_intervals"] >= 3 and watch["busy_intervals"] <= 1 and watch["client_bound"] is False
    assert "client-bound" not in result.stderr


@pytest.mark.slow
def test_prefix_watchers_on_a_killed_member_resume_on_another_and_repeat_nothing(tmp_out):
    """Three watcher users and three writers over three members: the watch streams on the killed follower break and
    open again elsewhere, each watcher from the revision after its last event, with nothing repeated or out of order."""
    prefix = tmp_out / "run"
    args = (
        *(*HEADLESS, "-u", "6", "-r", "6", "-t", "10s", "--csv", str(prefix)),
        *("EtcdPutUser", "EtcdWatcherUser", "--etcd-local-members", "3", "--etcd-target", "round-robin"),
        *("--etcd-watch-streams", "2", "--etcd-watchers-per-stream", "5", "--etcd-user-rate", "20"),
        *("--etcd-disrupt", "kill:follower@3s+3s", "--exit-code-on-error", "0"),
    )
    result = run_locust(*args, timeout=150)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_out / "run_audit.json").read_text())
    watches = record["watches"]
    print(f"\n{record['line']}")
    assert record["passed"] and watches["watchers"] == 30 and watches["resumed"] >= 2, record["line"]
    assert [watches[name] for name in ("repeated", "disordered", "split", "ahead", "broken")] == [0] * 5, watches
    assert watches["in_order"] > 0
    assert int(stats_rows(prefix)["watch/event"]["Failure Count"]) == 0


@pytest.mark.slow
def test_each_prev_kv_a_prefix_watcher_gets_is_the_version_it_delivered_before(etcd1, tmp_out):
    """Puts and deletes on fifty keys: the first watcher's prevKV of each event is the key's version it delivered last,
    none after a delete."""
    classes = ("EtcdPutUser", "EtcdMixedUser", "EtcdWatcherUser", "--etcd-mix", "put:50,delete:50")
    keys = ("--etcd-prefix", "/watchers-prev-kv/", "--etcd-cleanup", "--etcd-key-space-size", "50")
    watch = ("--etcd-watch-prev-kv", "--etcd-watch-streams", "2", "--etcd-watchers-per-stream", "5")
    args = (*classes, *keys, *watch, "--etcd-user-rate", "50")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *args, users=6, seconds=5))
    assert result.returncode == 0, result.stderr[-3000:]
    watches = json.loads((tmp_out / "run_audit.json").read_text())["watches"]
    assert watches["prev_kv_checked"] > 0 and watches["prev_kv_wrong"] == 0, watches
    assert f"0 of {watches['prev_kv_checked']:,} prevKV wrong" in result.stderr
