"""The tail of a run: causes provoked from outside the tool (etcdctl compact, defrag, move-leader, snapshot save, a
member frozen with SIGSTOP, one killed with SIGKILL), one of the tool's own disruptions and a GC pause forced in a
worker are each in ``tail.events`` within 2 s of when they happened, and a second beside each names it; a quiet run
names no defrag and no leader change."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import started_cluster
from support import REPO, free_port, headless_args, member_counter, run_analysis, run_locust, start_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ETCDCTL = str(Path(sys.executable).parent / "etcdctl")
NEAR_S = 2.0


@pytest.fixture(scope="module")
def quiet_etcd3():
    """Three members without auto-compaction: a compaction in the run is the test's own."""
    with started_cluster(3, auto_compaction_retention=None) as cluster:
        yield cluster


def etcdctl(endpoint: str, *args: str) -> str:
    result = subprocess.run(
        [ETCDCTL, "--endpoints", endpoint, *args], capture_output=True, text=True, timeout=20, check=True
    )
    return result.stdout


def status(endpoint: str) -> dict:
    return json.loads(etcdctl(endpoint, "endpoint", "status", "-w", "json"))[0]["Status"]


def host(url: str) -> str:
    return url.split("://", 1)[-1]


def tail_of(prefix: Path) -> dict:
    summary = json.loads(Path(f"{prefix}_summary.json").read_text())
    assert summary["tail"] == json.loads(Path(f"{prefix}_tail.json").read_text())
    return summary["tail"]


def assert_seen(tail: dict, cause: str, at: float, member: str | None = None) -> None:
    """An event of ``cause`` (on ``member``) within NEAR_S of ``at``, and a second of the report beside it names it."""
    events = [
        event for event in tail["events"] if event["cause"] == cause and (member is None or event["member"] == member)
    ]
    assert any(abs(event["at"] - at) <= NEAR_S for event in events), (cause, member, at, events)
    beside = [item for item in tail["seconds"] if abs(item["at"] + 0.5 - at) <= 1.5]
    every = [(item["at"], item["p99_ms"], item["waited_ms"]) for item in tail["seconds"]]
    assert any(cause in {found["cause"] for found in item["causes"]} for item in beside), (cause, at, beside, every)


def test_causes_provoked_from_outside_are_each_named_beside_their_second(quiet_etcd3, tmp_out):
    cluster = quiet_etcd3
    endpoints = cluster.endpoints
    leader = cluster.leader_index()
    followers = [index for index in range(3) if index != leader]
    provoked: dict[str, tuple[float, str | None]] = {}
    failures: list[BaseException] = []
    killed: list[int] = []
    run_started: list[float] = []

    def at(seconds: float, started: float) -> None:
        time.sleep(max(0.0, started + seconds - time.time()))

    def provoke() -> None:
        try:
            # the run's start: the users' first puts (no pre-flight burst), however long the tool took to get there
            before, deadline = sum(member_counter(cluster, "Put")), time.monotonic() + 60
            while sum(member_counter(cluster, "Put")) < before + 50:
                assert time.monotonic() < deadline, "the run's puts did not start within 60 s"
                time.sleep(0.2)
            started = time.time()
            run_started.append(started)
            at(2.5, started)
            revision = status(endpoints[0])["header"]["revision"]
            etcdctl(endpoints[0], "compact", str(revision - 1))
            provoked["compaction"] = (time.time(), None)
            at(4.5, started)
            began = time.time()
            etcdctl(endpoints[followers[0]], "defrag")
            provoked["defrag"] = ((began + time.time()) / 2, host(endpoints[followers[0]]))
            at(6.5, started)
            target = status(endpoints[followers[1]])["header"]["member_id"]
            etcdctl(",".join(endpoints), "move-leader", format(target, "x"))
            provoked["leader-change"] = (time.time(), None)
            at(8.5, started)
            began = time.time()
            etcdctl(endpoints[followers[0]], "snapshot", "save", str(tmp_out / "snapshot.db"))
            provoked["snapshot"] = ((began + time.time()) / 2, host(endpoints[followers[0]]))
            at(10.5, started)
            paused = cluster.leader_index()
            paused = next(index for index in range(3) if index != paused)
            cluster.pause_member(paused)
            provoked["member-unanswering"] = (time.time() + 1.0, host(endpoints[paused]))
            time.sleep(2.0)
            cluster.resume_member(paused)
            at(13.5, started)
            leader_now = cluster.leader_index()
            killed.append(next(index for index in range(3) if index not in (leader_now, paused)))
            cluster.kill_member(killed[0])
            provoked["killed"] = (time.time() + 0.5, host(endpoints[killed[0]]))
        except BaseException as error:  # reported by the test, not lost in the thread
            failures.append(error)

    prefix = tmp_out / "provoked"
    # --etcd-tail 1000: every second of the run is in the report, so the seconds beside each provocation are there to
    # name it whatever their rank (which of them is slowest is etcd's business, not this test's); the run is ended
    # once the provocations are done, however long a loaded machine made them take (its -t only bounds it)
    args = headless_args(cluster, prefix, "--etcd-tail", "1000", "--etcd-cleanup", users=4, seconds=120)
    # no audit: it would wait for the killed member (--etcd-audit-wait), which this test restarts only afterwards
    args += ["--etcd-disrupt", "defrag:leader@16.5s", "--etcd-disrupt-allowed", "--etcd-skip-audit"]
    args += ["--etcd-skip-preflight", "EtcdPutUser"]
    thread = threading.Thread(target=provoke)
    with start_locust(*args, log_dir=tmp_out) as run:
        thread.start()
        thread.join()
        # the killed member's seconds, and the tool's own defrag at 16.5 s of the run, before its end
        time.sleep(max(3.0, (run_started[0] if run_started else 0.0) + 19.0 - time.time()))
        run.interrupt()
        result = run.finish(timeout=120)
    assert not failures, failures
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    tail = tail_of(prefix)
    try:
        killed_at, killed_member = provoked.pop("killed")
        # a killed member refuses the scrape's connection: unanswering within the second, every second after
        assert_seen(tail, "member-unanswering", killed_at, killed_member)
        refused = [e for e in tail["events"] if e["member"] == killed_member and e["at"] > killed_at - 0.5]
        assert any("refused" in event["evidence"].lower() for event in refused), refused
    finally:
        if killed:
            cluster.start_member(killed[0])
    for cause, (when, member) in provoked.items():
        assert_seen(tail, cause, when, member)
    disruption = [event for event in tail["events"] if event["cause"] == "disruption:defrag"]
    assert len(disruption) == 1, tail["events"]
    assert_seen(tail, "disruption:defrag", disruption[0]["at"])
    assert "between the scrapes at" in next(e for e in tail["events"] if e["cause"] == "defrag")["evidence"]
    lines = [line for line in result.stderr.splitlines() if line.startswith("tail: ")]
    assert lines and "a coincidence in time, not a proof" in lines[0], result.stderr[-3000:]
    assert any("did not meet the source reports' precondition" in line and "compaction" in line for line in lines)
    assert tail["precondition"]["met"] is False
    analysis = run_analysis(prefix)
    assert analysis.returncode == 0, analysis.stderr
    assert "Worst seconds and the events beside them" in analysis.stdout
    assert f"defrag on {provoked['defrag'][1]}" in analysis.stdout
    assert "did not meet the source reports' precondition" in analysis.stdout


def test_a_quiet_run_names_no_defrag_and_no_leader_change(etcd1, tmp_out):
    prefix = tmp_out / "quiet"
    result = run_locust(*headless_args(etcd1, prefix, "--etcd-cleanup", "EtcdPutUser", users=2, seconds=5), timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    tail = tail_of(prefix)
    named = {event["cause"] for event in tail["events"]}
    named |= {cause["cause"] for item in tail["seconds"] for cause in item["causes"]}
    assert not named & {"defrag", "leader-change", "snapshot", "member-unanswering"}, tail
    assert 0 < len(tail["seconds"]) <= 10
    assert all(item["causes"] for item in tail["seconds"])


GC_LOCUSTFILE = """
import gc
import os
import time

import gevent
from gevent import monkey
from locust import events
from locust.runners import MasterRunner

from etcd_users.locustfile import *  # noqa: F403

_real_sleep = monkey.get_original("time", "sleep")
_forced = []


def _slow_collection(phase, info):
    if phase == "stop" and _forced:
        _forced.clear()
        _real_sleep(0.3)  # the collection "took" 300 ms more: every thread of the process waits on it


def _force_later():
    gevent.sleep(3.0)
    with open(os.environ["TAIL_GC_MARK"], "a") as mark:
        mark.write(f"{time.time()}\\n")
    _forced.append(True)
    gc.collect()


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    if not isinstance(environment.runner, MasterRunner):
        gc.callbacks.insert(0, _slow_collection)
        gevent.spawn(_force_later)
"""


def test_a_gc_pause_forced_in_a_worker_is_named_client_gc_on_the_master(etcd1, tmp_out):
    locustfile = tmp_out / "gc_locustfile.py"
    locustfile.write_text(GC_LOCUSTFILE)
    mark = tmp_out / "gc.mark"
    prefix = tmp_out / "gc"
    # the run ends a few seconds after the worker's pause, however late a loaded machine made it (-t only bounds it)
    args = headless_args(
        etcd1, prefix, "--etcd-tail", "100", "--etcd-cleanup", "--processes", "1", "EtcdPutUser", users=2, seconds=120
    )
    args[args.index("locustfile.py")] = str(locustfile)
    with start_locust(*args, env={"TAIL_GC_MARK": str(mark)}, cwd=REPO, log_dir=tmp_out) as run:
        deadline = time.monotonic() + 90
        while not mark.is_file():
            assert run.poll() is None and time.monotonic() < deadline, run.output()[1][-3000:]
            time.sleep(0.2)
        time.sleep(2.0)  # seconds of the run after the pause, beside it in the report
        run.interrupt()
        result = run.finish(timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    forced = float(mark.read_text().split()[0])
    tail = tail_of(prefix)
    # the worker's pause, on the master's timeline under the worker's id (the master may have real pauses of its own);
    # 300 ms at least: a loaded machine may add to the sleep and to the collection, never take from them
    forced_events = [
        event
        for event in tail["events"]
        if event["cause"] == "client-gc"
        and event["member"] not in ("local", "master")
        and (paused := re.search(r"stopped the process for (\d+) ms", event["evidence"]))
        and int(paused.group(1)) >= 300
    ]
    assert len(forced_events) == 1 and abs(forced_events[0]["at"] - forced) <= NEAR_S, tail["events"]
    # the same 300 ms held the worker's users' thread: its ticker woke that late
    late = [
        event
        for event in tail["events"]
        if event["cause"] == "loop-lag"
        and event["member"] == forced_events[0]["member"]
        and "users' thread" in event["evidence"]
    ]
    assert any(abs(event["at"] - forced) <= NEAR_S for event in late), tail["events"]
    assert_seen(tail, "client-gc", forced + 0.3)


def test_the_web_ui_s_tail_tab_shows_the_worst_seconds_so_far_with_a_disruption_beside_one(etcd1, tmp_out):
    port = free_port()
    args = ("-f", "locustfile.py", "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-cleanup")
    args += ("--etcd-disrupt", "defrag@2s", "--etcd-disrupt-allowed", "EtcdPutUser")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    url = f"http://127.0.0.1:{port}"

    def call(path: str, form: dict | None = None) -> dict:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        with opener.open(urllib.request.Request(url + path, data=data), timeout=10) as response:
            return json.loads(response.read())

    def tab() -> list[dict]:
        keys = [table["key"] for table in call("/stats/requests")["extended_stats"]]
        assert len(keys) == len(set(keys)), keys  # Locust memoizes the response: each table once, however often asked
        stats = call("/stats/requests")
        return next(table["data"] for table in stats["extended_stats"] if table["key"] == "etcd-tail")

    with start_locust(*args, "--web-host", "127.0.0.1", "--web-port", str(port), log_dir=tmp_out) as process:
        deadline = time.monotonic() + 60
        while True:
            try:
                [hint] = tab()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.output()[1][-3000:]
                time.sleep(0.3)
        assert hint["name"].startswith("No second measured yet")
        assert call("/swarm", {"user_count": "2", "spawn_rate": "2"})["success"]
        deadline = time.monotonic() + 30
        while not any("disruption:defrag on " in row["beside"] for row in tab()):
            assert time.monotonic() < deadline, tab()
            time.sleep(0.5)
        rows = tab()
        assert 1 <= len(rows) <= 10 and all(row["name"].startswith("s ") for row in rows), rows
        p99s = [float(row["p99"]) for row in rows]
        assert p99s == sorted(p99s, reverse=True), rows
        assert call("/stop", {})["success"]
        process.terminate()
        assert process.finish(timeout=60).returncode == 0
