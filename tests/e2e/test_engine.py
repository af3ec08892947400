"""The ready workloads on the loop thread (``--etcd-engine loop``, the default) against the greenlet path, end to end:
the same rows, labels and exit codes; every request counted once, against etcd's own count and by a listener of
Locust's ``request`` event; users that stop as Locust stops them; the audit and a disruption's cost under a kill.

The probes are ``tests/locustfiles/engine_probe.py``'s (every workload class, plus a counting listener and a look at
the loop after the stop).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from checks import assert_no_traceback, failure_labels, stats_rows
from support import HEADLESS, headless_args, member_counter, read_csv_rows, run_locust, start_locust

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.local import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROBE = ("-f", "tests/locustfiles/engine_probe.py")
READY = (
    "EtcdPutUser",
    "LinearizableRangeUser",
    "SerializableRangeUser",
    "EtcdDeleteUser",
    "EtcdTxnPutUser",
    "EtcdTxnMixedUser",
    "EtcdMixedUser",
    "EtcdYcsbUser",
)


def probe_args(cluster: LocalCluster, prefix, *args: str, users: int, seconds: int) -> list[str]:
    """A headless run of the probe's locustfile (``headless_args`` with the probe's ``-f``)."""
    return [*PROBE, *headless_args(cluster, prefix, *args, users=users, seconds=seconds)[2:]]


def listener_counts(stdout: str) -> dict[str, int]:
    (line,) = [line for line in stdout.splitlines() if line.startswith("listener counts: ")]
    return json.loads(line.removeprefix("listener counts: "))


def engine_line(stderr: str) -> str:
    (line,) = [line.split("] ", 1)[-1] for line in stderr.splitlines() if "engine: " in line]
    return line[line.index("engine: ") :]


@pytest.mark.parametrize("engine", ["loop", "greenlet"])
def test_every_ready_workload_makes_the_same_rows_on_either_engine(etcd3, tmp_out, engine):
    prefix = tmp_out / "run"
    args = ("--etcd-engine", engine, "--etcd-key-space-size", "500", "--etcd-prefix", f"/engine-{engine}/")
    args += ("--etcd-ycsb", "F")  # reads and read-modify-writes
    result = run_locust(*headless_args(etcd3, prefix, *args, "--etcd-cleanup", users=14, seconds=4), *READY)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = stats_rows(prefix)
    names = {
        "put",
        "range/linearizable",
        "range/serializable",
        "delete",
        "txn-put",
        "txn-mixed-read",
        "txn-mixed-write",
        "ycsb/read",
        "ycsb/rmw",
    }
    assert set(rows) == names, rows.keys()
    for name, row in rows.items():
        assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0, (name, row)
    line = engine_line(result.stderr)
    said = "on the loop thread (a coroutine per user" if engine == "loop" else "on greenlets (--etcd-engine greenlet)"
    assert said in line and all(name in line for name in READY) and line.count(" on ") == 1, line
    # the exact latencies count what Locust counts, name by name
    exact = {row["Name"]: row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Series"] == "service"}
    for name, row in rows.items():
        assert int(exact[name]["Count"]) == int(row["Request Count"]), name
    assert "audit: " in result.stderr and ", 0 lost" in result.stderr, result.stderr[-3000:]


def counts_agree_with_etcd(locust_puts: int, etcd_puts: float, users: int) -> bool:
    """Every put Locust counted reached etcd, and etcd handled at most the users' last puts more (those the stop cut
    short after etcd had them), besides the one put of the write check at start (``target_cluster``)."""
    return locust_puts + 1 <= etcd_puts <= locust_puts + 1 + users


def put_run(cluster: LocalCluster, out, *env: tuple[str, str], users: int = 16, seconds: int = 4):
    prefix = out / "run"
    before = member_counter(cluster, "Put")[0]
    environment = dict(env)
    # without the pre-flight's burst of puts: etcd's count is then the run's puts and the write check's
    args = probe_args(cluster, prefix, "--etcd-skip-preflight", users=users, seconds=seconds)
    result = run_locust(*args, "EtcdPutUser", env=environment)
    assert_no_traceback(result.stdout + result.stderr)
    after = member_counter(cluster, "Put")[0]
    return result, int(stats_rows(prefix)["put"]["Request Count"]), after - before


def test_every_request_is_counted_once_by_locust_and_by_another_listener(fresh_etcd1, tmp_out):
    result, puts, handled = put_run(fresh_etcd1, tmp_out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert counts_agree_with_etcd(puts, handled, 16), (puts, handled)
    assert listener_counts(result.stdout) == {"put": puts}


def test_a_batch_of_results_lost_on_the_way_fails_the_count(fresh_etcd1, tmp_out):
    result, puts, handled = put_run(fresh_etcd1, tmp_out, ("ENGINE_PROBE_DROP_BATCH", "5"))
    assert not counts_agree_with_etcd(puts, handled, 16), (puts, handled)
    assert listener_counts(result.stdout)["put"] == puts  # the listener and Locust both missed the same batch


def test_users_end_with_their_run_and_send_nothing_after_the_stop(etcd1, tmp_out):
    args = ("--stop-timeout", "2", "--etcd-prefix", "/engine-stop/", "--etcd-cleanup")
    result = run_locust(*probe_args(etcd1, tmp_out / "run", *args, users=32, seconds=3), "EtcdPutUser")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "after the stop: 0 requests, 0 users on the loop" in result.stdout, result.stdout[-2000:]


def test_ctrl_c_ends_every_user_s_coroutine(etcd1, tmp_out):
    prefix = tmp_out / "run"
    args = probe_args(etcd1, prefix, "--etcd-prefix", "/engine-ctrl-c/", "--etcd-cleanup", users=32, seconds=60)
    with start_locust(*args, "EtcdPutUser", log_dir=tmp_out) as run:
        deadline = time.monotonic() + 60
        while "All users spawned" not in run.output()[1] and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        run.interrupt()
        finished = run.finish(timeout=60)
    stdout, stderr = finished.stdout, finished.stderr
    assert_no_traceback(stdout + stderr)
    assert "after the stop: 0 requests, 0 users on the loop" in stdout, stdout[-2000:] + stderr[-2000:]


def test_the_stop_lets_the_calls_on_the_wire_finish_so_etcd_3_5_1_survives_its_read_only_txns(tmp_out):
    """etcd 3.5.0-3.5.4 panic on a read-only txn its client cancels (etcd issue #14110). Stopping 64 txn-mixed users
    mid-call cancelled such txns and killed the tool's own 3.5.1 member in 4 runs of 6; the stop now lets the calls
    on the wire finish, and the member answers the audit every time."""
    args = ("--etcd-txn-ops", "8", "--etcd-rw-ratio", "4", "EtcdTxnMixedUser")
    for attempt in range(2):
        result = run_locust(
            *HEADLESS, "-u", "64", "-r", "64", "-t", "3s", "--csv", str(tmp_out / f"run{attempt}"), *args
        )
        assert_no_traceback(result.stderr)
        assert result.returncode == 0, result.stderr[-3000:]
        assert re.search(
            r"^audit: 1 member's HashKV equal at rev \d+; [\d,]+ acknowledged writes, 0 lost$", result.stderr, re.M
        )


def test_a_shape_lowering_the_users_lowers_the_rate_within_two_seconds(etcd1, tmp_out):
    prefix = tmp_out / "run"
    shape = ("-f", "locustfile.py,shapes/ladder.py", "--shape-ladder", "8,1", "--shape-step-time", "6")
    rate = ("--etcd-user-rate", "40", "--etcd-prefix", "/engine-shape/", "--etcd-cleanup")
    timing = ("--headless", "--only-summary", "--csv", str(prefix), "--etcd-endpoints", ",".join(etcd1.endpoints))
    result = run_locust(*shape, *timing, *rate, "EtcdPutUser")
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    levels = json.loads((tmp_out / "run_shape.json").read_text())["levels"]
    second_level = levels[1]["started_at"]
    per_second = {
        int(row["Timestamp"]): int(row["Requests"])
        for row in read_csv_rows(f"{prefix}_latency_history.csv")
        if row["Name"] == "put" and row["Series"] == "service"
    }
    # whole seconds of each level: the second in which the level changed holds some of both
    before = [count for second, count in per_second.items() if second_level - 4 <= second <= second_level - 1]
    after = [count for second, count in per_second.items() if second_level + 2 <= second < second_level + 5]
    assert before and after, per_second
    # 8 users at 40/s against 1: whatever the machine holds, one user sends at most its share and its catch-up
    assert max(after) < 0.5 * min(before), (before, after)


def test_a_custom_user_keeps_its_greenlet_beside_ready_workloads_on_the_loop(etcd1, tmp_out):
    """Both engines in one process under load: they note their writes and reads for the audit and count their calls
    on the same connections from two threads, and the audit finds every acknowledged write."""
    prefix = tmp_out / "run"
    args = ("--etcd-prefix", "/engine-custom/", "--etcd-cleanup", "--etcd-conns", "2")
    custom = ("-f", "examples/custom_workload.py,locustfile.py")
    result = run_locust(
        *custom,
        *headless_args(etcd1, prefix, *args, users=32, seconds=4)[2:],
        "WriteThenReadUser",
        "EtcdPutUser",
        "LinearizableRangeUser",
    )
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    line = engine_line(result.stderr)
    on_loop = line.removeprefix("engine: ").split(" on the loop thread")[0]
    assert set(on_loop.split(", ")) == {"EtcdPutUser", "LinearizableRangeUser"}, line  # in Locust's order of classes
    assert "; WriteThenReadUser on greenlets (tasks of its own)" in line, line
    rows = stats_rows(prefix)
    assert {"put", "write", "read-back", "range/linearizable"} <= set(rows), rows.keys()
    assert all(int(row["Failure Count"]) == 0 for row in rows.values()), rows
    audit = r"^audit: 1 member's HashKV equal at rev \d+; [\d,]+ acknowledged writes, 0 lost"
    assert re.search(audit, result.stderr, re.M), result.stderr[-3000:]


def test_a_follower_killed_under_the_loop_s_puts_loses_no_acknowledged_write_and_has_its_cost(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "32", "-r", "32", "-t", "8s", "--csv", str(prefix))
    schedule = ("--etcd-local-members", "3", "--etcd-disrupt", "kill:follower@3s+1s", "--etcd-target", "round-robin")
    result = run_locust(*HEADLESS, *timing, *schedule, "EtcdPutUser", timeout=150)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: the puts the kill failed
    assert re.search(r"audit: 3 members' HashKV equal at rev \d+; [\d,]+ acknowledged writes, 0 lost", result.stderr), (
        result.stderr[-3000:]
    )
    (window,) = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    (put,) = [entry for entry in window["cost"] if entry["name"] == "put"]
    assert put["requests"] > 0 and "gap_ms" in put, put
    labels = failure_labels(prefix)
    assert all(not label.startswith(("Cancelled", "AioRpcError", "<")) for label in labels), labels
    assert os.path.exists(f"{prefix}_latency.csv")


def test_a_rate_above_what_one_process_sends_says_early_how_many_processes_it_needs(etcd1, tmp_out):
    # 64 users at 1,000/s each: 64,000 puts a second, beyond one Python process on any machine
    args = ("--etcd-user-rate", "1000", "--etcd-prefix", "/engine-rate/", "--etcd-cleanup")
    result = run_locust(*headless_args(etcd1, tmp_out / "run", *args, users=64, seconds=10), "EtcdPutUser")
    assert_no_traceback(result.stdout + result.stderr)
    (line,) = [line for line in result.stderr.splitlines() if "the rate asks " in line]
    match = re.search(r"the rate asks 64,000 requests/s, and a request costs this client ([\d,]+) µs of CPU", line)
    assert match, line
    needed = int(re.search(r"so the rate needs (\d+) processes and this run has 1 process", line).group(1))
    assert needed >= 2 and f"give --processes {needed}" in line, line
    # said early: before the run's end, not among its closing lines
    assert result.stderr.index(line) < result.stderr.index("Response time percentiles"), result.stderr[-3000:]


def started_calls(cluster: LocalCluster, *methods: str) -> int:
    """etcd's own count of the calls of ``methods`` it started, on every member."""
    return int(
        sum(
            metric_sum(fetch_metrics(url), "grpc_server_started_total", grpc_method=method)
            for url in cluster.metrics_urls
            for method in methods
        )
    )


def answered_unreported(stdout: str) -> int:
    (line,) = [line for line in stdout.splitlines() if line.startswith("answered unreported: ")]
    return int(line.removeprefix("answered unreported: "))


def test_nothing_is_sent_after_a_user_s_stop_not_even_the_second_call_of_an_operation(fresh_etcd1, tmp_out):
    """EtcdDeleteUser puts a key, then deletes it. Stopped between the two, a user must not send the delete: etcd
    then started exactly the calls Locust counted, the write check's put and delete, and those on the wire when their
    users stopped (answered, not reported)."""
    before = started_calls(fresh_etcd1, "Put", "DeleteRange")
    args = probe_args(fresh_etcd1, tmp_out / "run", "--etcd-skip-preflight", users=48, seconds=3)
    result = run_locust(*args, "EtcdDeleteUser", env={"ENGINE_PROBE_AFTER_STOP_S": "0"})
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = stats_rows(tmp_out / "run")
    counted = int(rows["put"]["Request Count"]) + int(rows["delete"]["Request Count"])
    unreported = answered_unreported(result.stdout)
    assert unreported <= 48
    assert started_calls(fresh_etcd1, "Put", "DeleteRange") - before == counted + 2 + unreported, (counted, unreported)


def test_a_listener_that_raises_gets_every_request_and_the_run_exits_2_on_either_engine(etcd1, tmp_out):
    """As Locust's EventHook.fire treats a listener: each request on its own, the failure logged, exit code 2."""
    for engine in ("loop", "greenlet"):
        prefix = tmp_out / engine
        args = ("--etcd-engine", engine, "--etcd-prefix", f"/engine-raise-{engine}/", "--etcd-cleanup")
        result = run_locust(
            *probe_args(etcd1, prefix, *args, users=8, seconds=3), "EtcdPutUser", env={"ENGINE_PROBE_RAISE_EVERY": "97"}
        )
        puts = int(stats_rows(prefix)["put"]["Request Count"])
        assert puts > 97, puts
        assert listener_counts(result.stdout) == {"put": puts}, engine
        assert result.returncode == 2, (engine, result.stderr[-3000:])
        assert "Uncaught exception in event handler" in result.stderr
        assert "the probe's listener fails on request 97" in result.stderr


def test_a_listener_s_stop_user_stops_the_user_whose_request_it_was(etcd1, tmp_out):
    args = ("--etcd-prefix", "/engine-stop-user/", "--etcd-cleanup", "--etcd-user-rate", "50")
    env = {"ENGINE_PROBE_STOP_USERS_AFTER": "20"}
    result = run_locust(*probe_args(etcd1, tmp_out / "run", *args, users=4, seconds=4), "EtcdPutUser", env=env)
    assert_no_traceback(result.stdout + result.stderr)
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("fewest users: ")]
    assert line == "fewest users: 0", result.stdout[-2000:]


def test_a_level_counts_the_failures_that_ended_in_it_none_between_two_levels(etcd1, tmp_out):
    """Three levels of the same 4 users, every put refused by etcd (a value over its request limit): each level's
    failures are those that ended between its users all running and its end, to the request."""
    prefix, out = tmp_out / "run", tmp_out / "failures.json"
    shape = ("-f", f"{PROBE[1]},shapes/ladder.py", "--shape-ladder", "4,4,4", "--shape-step-time", "2")
    run = ("--headless", "--only-summary", "--csv", str(prefix), "--etcd-endpoints", ",".join(etcd1.endpoints))
    # the member takes 1.5 MiB (etcd's default): told it takes more, the tool sends what etcd refuses
    too_large = ("--etcd-val-size", "2000000", "--etcd-max-request-bytes", "3000000")
    load = ("--etcd-user-rate", "100", *too_large, "--etcd-prefix", "/engine-levels/")
    result = run_locust(*shape, *run, *load, "EtcdPutUser", env={"ENGINE_PROBE_FAILURES_OUT": str(out)})
    assert_no_traceback(result.stdout + result.stderr)
    ended = json.loads(out.read_text())
    levels = json.loads((tmp_out / "run_shape.json").read_text())["levels"]
    assert len(levels) == 3 and ended, (len(levels), len(ended))
    for level in levels:
        within = sum(level["running_at"] <= at < level["ended_at"] for at in ended)
        counted = sum(error["occurrences"] for error in level["errors"])
        assert within > 0 and abs(counted - within) <= 1, (level["name"], counted, within)


def test_a_run_whose_locust_lacks_batch_logging_counts_each_request_and_says_so(fresh_etcd1, tmp_out):
    result, puts, handled = put_run(fresh_etcd1, tmp_out, ("ENGINE_PROBE_NO_BATCH_LOGGING", "1"))
    assert result.returncode == 0, result.stderr[-3000:]
    said = "each result reaches Locust's statistics on its own"
    lines = [line for line in result.stderr.splitlines() if said in line]
    assert len(lines) == 1 and "Locust 9.9 has no StatsEntry.num_reqs_per_sec" in lines[0], lines
    assert counts_agree_with_etcd(puts, handled, 16), (puts, handled)
    assert listener_counts(result.stdout) == {"put": puts}


def test_a_short_run_on_this_locust_counts_its_requests_in_its_csv(fresh_etcd1, tmp_out):
    """CI runs this module on the lowest Locust requirements.txt allows, and on the newest."""
    result, puts, handled = put_run(fresh_etcd1, tmp_out, seconds=5)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no request was measured" not in result.stderr and "AttributeError" not in result.stderr
    assert puts > 0 and counts_agree_with_etcd(puts, handled, 16), (puts, handled)
    exact = {row["Name"]: row for row in read_csv_rows(tmp_out / "run_latency.csv") if row["Series"] == "service"}
    assert int(exact["put"]["Count"]) == puts
