"""A long write run against a small quota, for real: one member with an 8 MiB quota and the same load each time,
120 puts/s of 4 KB values over 100 keys for 20 s, whose values alone outweigh the quota. Without compaction the db
passes 80 % (one warning with the pace), fills (one NOSPACE alarm at ERROR with the commands that recover) and the run
goes on counting the refused writes; with the local etcd's own compaction, or with ``--etcd-compact-interval 1`` on
the master, it stays far below (those runs stop once their values outweigh 60 % of the quota). And ``python -m
etcd_users.local`` with a quota and a compaction of its own. The pure parts are ``tests/unit/test_space.py``."""

import base64
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from checks import assert_no_traceback, failure_labels, history, refusal_line, stats_rows
from support import (
    HEADLESS,
    REPO,
    free_port,
    headless_args,
    member_counter,
    read_csv_rows,
    run_locust,
    start_locust,
)

from etcd_users.exposition import metric_sum, parse_metrics
from etcd_users.local import LocalCluster
from etcd_users.members.server_metrics import CSV_SUFFIX, DB_SIZE
from etcd_users.members.server_metrics import QUOTA as QUOTA_METRIC

pytestmark = pytest.mark.e2e

QUOTA = 8 * 1024 * 1024
VALUE = 4096
SECONDS = 20
NOSPACE = "etcdserver: mvcc: database space exceeded"
# 4 users at 30 puts/s: 120 puts/s, about 0.8 MB/s of db growth (4 KB values take two bbolt pages): full in ~11 s
LOAD = ("--etcd-user-rate", "30", "--etcd-val-size", str(VALUE), "--etcd-key-space-size", "100")
# the compaction tests' runs are stopped (Ctrl-C) once etcd answered this many puts, however long that took: values
# past 60 % of the quota plus some spare (a put or two of the start, the last second that Locust may not count)
PUTS_PAST_60_PERCENT = int(0.7 * QUOTA / VALUE)
SPACE_LOGGER = "etcd_users.monitoring.space"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@contextmanager
def small_quota(auto_compaction_retention: str | None) -> Iterator[LocalCluster]:
    cluster = LocalCluster(1, name="space", quota_bytes=QUOTA, auto_compaction_retention=auto_compaction_retention)
    cluster.start(timeout=30)
    try:
        yield cluster
    finally:
        cluster.stop()


def metric(url: str, name: str) -> float:
    with _DIRECT.open(url, timeout=30) as response:  # a member on a loaded machine may take seconds
        return metric_sum(parse_metrics(response.read().decode()), name)


def db_size(cluster: LocalCluster) -> float:
    """The member's db file size: its high-water mark (it only shrinks with a defrag)."""
    return metric(cluster.metrics_urls[0], DB_SIZE)


def gateway(endpoint: str, path: str, **body) -> dict:
    """A call through etcd's JSON gateway (no gRPC client in this gevent-patched process): its answer or its error."""
    body = {
        name: base64.b64encode(value).decode() if isinstance(value, bytes) else value for name, value in body.items()
    }
    request = urllib.request.Request(f"{endpoint}/v3/{path}", data=json.dumps(body).encode(), method="POST")
    try:
        with _DIRECT.open(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read())


def space_lines(stderr: str, level: str) -> list[str]:
    return [line for line in stderr.splitlines() if f"/{level}/{SPACE_LOGGER}:" in line]


def run(*args: str, timeout: float = 60):
    result = run_locust(*args, "--etcd-prefix", "/test-space/", *LOAD, "EtcdPutUser", timeout=timeout)
    assert_no_traceback(result.stdout + result.stderr)
    return result


def run_until_past_60_percent(cluster: LocalCluster, log_dir, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run the load until etcd answered PUTS_PAST_60_PERCENT puts, then stop it as Ctrl-C would: the result and the
    seconds the run lasted. Its -t (60 s) only bounds a run that goes wrong."""
    started = time.monotonic()
    process = start_locust(*args, "--etcd-prefix", "/test-space/", *LOAD, "EtcdPutUser", log_dir=log_dir)
    with process:
        while sum(member_counter(cluster, "Put")) < PUTS_PAST_60_PERCENT:
            assert process.poll() is None, process.output()[1][-3000:]
            assert time.monotonic() - started < 50, f"too few puts in 50 s\n{process.output()[1][-3000:]}"
            time.sleep(0.2)
        process.interrupt()
        result = process.finish(timeout=60)
    assert_no_traceback(result.stdout + result.stderr)
    return result, time.monotonic() - started


@pytest.mark.slow
def test_without_compaction_the_db_fills_one_warning_one_alarm_and_the_run_goes_on(tmp_out):
    with small_quota(auto_compaction_retention=None) as cluster:
        prefix = tmp_out / "run"
        args = headless_args(cluster, prefix, "--etcd-metrics-interval", "1", users=4, seconds=SECONDS)
        result = run(*args)
        [endpoint] = cluster.endpoints

    assert result.returncode == 1, result.stderr[-3000:]  # requests failed, and the run ended at its time limit
    assert "--run-time limit reached" in result.stderr
    [warning] = space_lines(result.stderr, "WARNING")
    found = re.search(
        rf"etcd {endpoint}: db ([\d.]+) MiB is ([\d.]+) % of its 8\.0 MiB quota, growing ([\d.]+) KiB/s: full in about "
        r"(\d+) s; compact \(--etcd-compact-interval\) or raise --quota-backend-bytes$",
        warning,
    )
    assert found, warning
    assert 80.0 < float(found.group(2)) < 100.0 and 100 < float(found.group(3)) < 8192, warning
    [alarm] = space_lines(result.stderr, "ERROR")
    assert alarm.endswith(
        f"etcd NOSPACE alarm on {endpoint}: the db reached its quota and etcd refuses every write with 'mvcc: database "
        "space exceeded' until the alarm is disarmed, in this run and the next; the run goes on, counting them as "
        "failures. To recover, compact, defragment every member and disarm:"
    ), alarm
    lines = result.stderr.splitlines()
    commands = lines[lines.index(alarm) + 1 : lines.index(alarm) + 4]
    assert re.fullmatch(rf"    etcdctl --endpoints {endpoint} compact \d+", commands[0]), commands
    assert commands[1:] == [
        f"    etcdctl --endpoints {endpoint} defrag",
        f"    etcdctl --endpoints {endpoint} alarm disarm",
    ]
    assert result.stderr.index(warning) < result.stderr.index(alarm)

    # every refused write counted under etcd's label, and the users kept writing until the end
    assert list(failure_labels(prefix)) == [NOSPACE]
    put = stats_rows(prefix)["put"]
    assert 0 < int(put["Failure Count"]) < int(put["Request Count"])
    seconds = history(prefix)
    failing = [now for before, now in zip(seconds, seconds[1:], strict=False) if now[2] > before[2]]
    assert len(failing) >= 3, seconds  # failures grew in several seconds after the db filled, not once
    assert seconds[-1][1] > failing[0][1]
    rows = read_csv_rows(f"{prefix}{CSV_SUFFIX}")
    assert max(int(row["DbSizeBytes"]) for row in rows if not row["Error"]) >= 0.95 * QUOTA


@pytest.mark.slow
def test_the_local_etcd_s_own_compaction_keeps_the_same_run_far_below_its_quota(tmp_out):
    with small_quota(auto_compaction_retention="1s") as cluster:
        # no --csv: the poller watches the quota all the same
        args = (*HEADLESS, "-u", "4", "-r", "4", "-t", "60s", "--etcd-metrics-interval", "1")
        result, _ = run_until_past_60_percent(cluster, tmp_out, *args, "--etcd-endpoints", cluster.endpoints[0])
        high_water = db_size(cluster)

    assert result.returncode == 0, result.stderr[-3000:]
    assert "polling /metrics of 1 member every 1s (db size against quota)" in result.stderr
    assert space_lines(result.stderr, "WARNING") == [] and space_lines(result.stderr, "ERROR") == []
    puts = re.search(r"etcd\s+put\s+(\d+)\s+0\(0\.00%\)", result.stderr)  # Locust's summary, without failures
    assert puts, result.stderr[-3000:]
    # values past 60 % of the quota were written and the db stayed below that: compaction gave the space back
    assert int(puts.group(1)) * VALUE > 0.6 * QUOTA, result.stderr[-3000:]
    assert high_water < 0.6 * QUOTA


@pytest.mark.slow
def test_the_master_compacts_every_interval_and_the_workers_never(tmp_out):
    with small_quota(auto_compaction_retention=None) as cluster:
        prefix = tmp_out / "run"
        args = headless_args(cluster, prefix, "--etcd-metrics-interval", "1", users=4, seconds=60)
        # the master binds a free port, not 5557 (another run may hold it), and the forked workers dial it
        port = str(free_port())
        distributed = ("--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", port)
        distributed += ("--master-port", port, "--etcd-compact-interval", "1")
        result, seconds = run_until_past_60_percent(cluster, tmp_out, *args, *distributed)
        [compactions] = member_counter(cluster, "Compact")

    assert result.returncode == 0, result.stderr[-3000:]
    assert space_lines(result.stderr, "ERROR") == []
    # one compactor, the master's: one start line and one summary in the output of all three processes
    [started] = [line for line in result.stderr.splitlines() if "/INFO/etcd_users.compaction: compacting" in line]
    assert started.endswith("compacting etcd's history every 1s at the revision of 1s ago (--etcd-compact-interval)")
    [summary] = [line for line in result.stderr.splitlines() if "/INFO/etcd_users.compaction: etcd compaction:" in line]
    done = re.search(r"etcd compaction: (\d+) compactions, the last at revision (\d+)$", summary)
    # periodic (not once) and never more often than asked; how many fit in the run depends on the machine's pace
    assert done and 3 <= int(done.group(1)) <= seconds + 1, summary
    assert compactions == int(done.group(1))  # every Compact the member handled was the master's
    assert not [line for line in result.stderr.splitlines() if "etcd compaction failed" in line]
    assert stats_rows(prefix)["put"]["Failure Count"] == "0"
    assert int(stats_rows(prefix)["put"]["Request Count"]) * VALUE > 0.6 * QUOTA
    rows = read_csv_rows(f"{prefix}{CSV_SUFFIX}")
    assert max(int(row["DbSizeBytes"]) for row in rows if not row["Error"]) < 0.6 * QUOTA


def test_the_command_line_sets_the_quota_and_the_compaction(tmp_path):
    stdout_path, stderr_path = tmp_path / "stdout", tmp_path / "stderr"
    args = ["--quota-backend-bytes", str(QUOTA), "--auto-compaction-retention", "1s"]
    with open(stdout_path, "w") as stdout, open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "etcd_users.local", *args], cwd=REPO, stdout=stdout, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 40
        while not (found := re.search(r"^LOCUST_ETCD_ENDPOINTS=(\S+)$", stdout_path.read_text(), re.MULTILINE)):
            assert process.poll() is None and time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.1)
        endpoint = found.group(1)
        assert "(quota 8.0 MiB, history compacted every 1s)" in stderr_path.read_text()
        assert metric(f"{endpoint}/metrics", QUOTA_METRIC) == QUOTA
        first = int(gateway(endpoint, "kv/put", key=b"/test-space/k", value=b"1")["header"]["revision"])
        deadline = time.monotonic() + 15
        while "error" not in (answer := gateway(endpoint, "kv/range", key=b"/test-space/k", revision=first)):
            assert time.monotonic() < deadline, "the history was not compacted within 15 s"
            gateway(endpoint, "kv/put", key=b"/test-space/k", value=b"2")  # a new revision to compact up to
            time.sleep(0.5)
        assert "required revision has been compacted" in answer["error"], answer
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


# etcd's own record of the compactions its store has done (a histogram: its count is how many)
COMPACTIONS = "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count"
STARTED = re.compile(r"started a local etcd \(1 member, [^)]*\): (http://127\.0\.0\.1:\d+); (.*)$", re.MULTILINE)
# outside the run's prefix, which the tool finds empty at its start only if the test writes nowhere in it
MARKER = b"/test-space-marker/first"
QUIET_SECONDS = 8  # of writes with compaction off: the 1s case compacts within them several times


@pytest.mark.parametrize(("retention", "compacts"), [("0", False), ("1s", True)])
def test_the_run_s_own_local_etcd_never_compacts_with_a_retention_of_0(tmp_out, retention, compacts):
    args = (*HEADLESS, "-u", "2", "-r", "2", "-t", "60s", "--etcd-prefix", "/test-space/", "--etcd-user-rate", "20")
    args += ("--etcd-local-compaction-retention", retention, "EtcdPutUser")
    with start_locust(*args, log_dir=tmp_out) as process:
        deadline = time.monotonic() + 60
        while not (started := STARTED.search(process.output()[1])):
            assert process.poll() is None and time.monotonic() < deadline, process.output()[1][-3000:]
            time.sleep(0.2)
        endpoint, space = started.groups()
        assert space.endswith("no auto-compaction" if not compacts else "history compacted every 1s"), space
        first = int(gateway(endpoint, "kv/put", key=MARKER, value=b"1")["header"]["revision"])
        quiet_until = time.monotonic() + QUIET_SECONDS
        deadline = time.monotonic() + 40
        while True:  # the users' puts move the revision on, past the first
            answer = gateway(endpoint, "kv/range", key=MARKER, revision=first)
            if compacts and "error" in answer:
                break
            assert process.poll() is None, process.output()[1][-3000:]
            if not compacts and time.monotonic() > quiet_until:
                break
            assert time.monotonic() < deadline, f"the history was not compacted within 40 s: {answer}"
            time.sleep(0.5)
        compactions = metric(f"{endpoint}/metrics", COMPACTIONS)
        revision = int(gateway(endpoint, "kv/range", key=MARKER)["header"]["revision"])
        process.interrupt()
        result = process.finish(timeout=60)

    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    assert revision > first + 20  # the users wrote all along
    if compacts:
        assert "required revision has been compacted" in answer["error"], answer
        assert compactions >= 1
    else:
        assert "error" not in answer and base64.b64decode(answer["kvs"][0]["value"]) == b"1", answer
        assert compactions == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--etcd-local-compaction-retention", "5"),
            "--etcd-local-compaction-retention: '5' is not a retention; give whole seconds, minutes or hours, e.g. 5s, "
            "10m or 1h (0: no compaction)",
        ),
        (
            ("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-local-compaction-retention", "0"),
            "--etcd-local-compaction-retention: sets the compaction of the local etcd the tool starts, and "
            "--etcd-endpoints gives a cluster of your own (--etcd-compact-interval compacts it); leave one of them out",
        ),
    ],
)
def test_a_bad_or_misplaced_retention_is_refused_in_one_line(args, message):
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", *args, "EtcdPutUser", timeout=60)
    assert message in refusal_line(result)
    assert "started a local etcd" not in result.stderr
