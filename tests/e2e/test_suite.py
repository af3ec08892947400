"""Benchmark suites (``python -m etcd_users.suite``): validation, the plan, and whole suites of real Locust runs
against the fresh local etcd the runner starts for each run."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import REPO, kill_group, read_csv_rows
from support import SMALL_SUITE as SMALL

from etcd_users.analysis.rank_test import least_runs
from etcd_users.open_files import OTHER_FILES
from etcd_users.suite.loader import load_suite

pytestmark = pytest.mark.e2e

SMALL_IDS = [
    "users=2_class=EtcdPutUser",
    "users=2_class=SerializableRangeUser",
    "users=4_class=EtcdPutUser",
    "users=4_class=SerializableRangeUser",
]
# the field report's ladder: users, connections per endpoint per process, processes
LADDER = [(1, 1, 1), (200, 67, 1), (2000, 667, 1), (5000, 834, 2), (10000, 1667, 2), (20000, 3334, 2)]
SMALL_PREFIXES = [f"{combo}/rep{repeat}" for combo in SMALL_IDS for repeat in (1, 2)]


def suite_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "etcd_users.suite", *args]


def run_suite(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        suite_command(*args),
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def aggregated(prefix: Path) -> dict[str, str]:
    return next(row for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] == "Aggregated")


def snapshot(directory: Path) -> dict[str, int]:
    """Every file under the directory (but suite.json, rewritten by each invocation) → mtime in ns."""
    return {
        str(path.relative_to(directory)): path.stat().st_mtime_ns
        for path in directory.rglob("*")
        if path.is_file() and path.name != "suite.json"
    }


def processes_mentioning(*fragments: str) -> list[str]:
    """Command lines of running processes that contain any of the fragments."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(fragment in command for fragment in fragments):
            found.append(command)
    return found


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# -- validation and the plan ---------------------------------------------------------------------------------


def test_dry_run_lists_the_combinations_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = run_suite("run", str(SMALL), "--out", str(out), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "4 combinations × 2 repeats = 8 runs of 2s" in result.stdout
    for combo in SMALL_IDS:
        assert f"  {combo}: " in result.stdout
        assert f"--csv {out}/{combo}/rep{{k}} " in result.stdout
    assert "--etcd-key-space-size 200" in result.stdout
    quick = run_suite("run", str(SMALL), "--out", str(out), "--dry-run", "--quick")
    assert quick.returncode == 0, quick.stderr
    assert "small (quick)" in quick.stdout and "4 combinations × 1 repeat = 4 runs of 2s" in quick.stdout
    assert not out.exists()


def test_a_dry_run_gives_the_local_etcds_round_trip_to_its_cluster_not_to_locust(tmp_path):
    result = run_suite("run", str(REPO / "suites" / "peer-rtt.yaml"), "--quick", "--out", str(tmp_path), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "6 combinations × 1 repeat = 6 runs of 4s against a fresh 3-member local etcd per run" in result.stdout
    commands = [line for line in result.stdout.splitlines() if " -m locust " in line]
    assert len(commands) == 6
    local = "--etcd-endpoints '<local 3-member etcd (--etcd-local-peer-rtt 20ms)>'"
    assert sum(local in line for line in commands) == 3
    assert not [line for line in commands if " --etcd-local-peer-rtt " in line]


def test_a_dry_run_ends_with_the_comparison_of_the_suite_s_compare(tmp_path):
    result = run_suite("run", str(REPO / "suites" / "version-compare.yaml"), "--out", str(tmp_path), "--dry-run")
    assert result.returncode == 0, result.stderr
    sides = f"{tmp_path}:local-binary=3.4 {tmp_path}:local-binary=3.5"
    compare = (
        f"then compare: python -m etcd_users.analysis compare {sides} --changed etcd_version --out {tmp_path}/compare"
    )
    assert result.stdout.rstrip().splitlines()[-1] == compare


def test_the_field_report_s_whole_ladder_plans_its_processes_within_the_open_file_limit():
    result = run_suite("run", "suites/tls-put-concurrency-ladder.yaml", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "6 combinations × 2 repeats = 12 runs of 60s" in result.stdout
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    planned = {}
    for users, conns, processes in LADDER:
        combo = f"users={users}_conns={conns}_processes={processes}"
        block = result.stdout.split(f"  {combo}: ", 1)[1].split("\n  users=", 1)[0]
        per_process = conns * 3
        plural = "es" if processes > 1 else ""
        assert f"{users} users over {processes} process{plural}, {per_process} connections each" in block
        assert f" -u {users} -r {users} " in block and f" --etcd-conns {conns}" in block
        assert (f" --processes {processes} " in block) == (processes > 1)
        assert conns * 3 * processes >= users  # clients = connections
        if hard != resource.RLIM_INFINITY:
            assert per_process <= hard - OTHER_FILES
        planned[users] = processes
    assert planned == {1: 1, 200: 1, 2000: 1, 5000: 2, 10000: 2, 20000: 2}


def test_a_cell_whose_connections_cannot_fit_a_process_is_refused_in_one_line(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit of open files here")
    conns = hard // 3 + 1  # three members: more connections than the limit in one process
    suite = tmp_path / "x.yaml"
    suite.write_text(BASE.replace("users: 1", f"users: {conns * 3}") + f"members: 3\nfixed:\n  conns: {conns}\n")
    for flag in ("--dry-run", None):
        result = run_suite("run", str(suite), "--out", str(tmp_path / "out"), *([flag] if flag else []))
        assert result.returncode == 2, result.stderr
        assert result.stdout == "" and len(result.stderr.splitlines()) == 1
        assert result.stderr.startswith(f"error: {suite}: {conns * 3} connections per process")
        assert f"open-file limit of {hard}" in result.stderr and "raise processes and divide conns" in result.stderr
    assert not (tmp_path / "out").exists()


def test_ready_suites_and_their_quick_sections_are_valid():
    suites = sorted(str(path.relative_to(REPO)) for path in (REPO / "suites").glob("*.yaml"))
    assert suites == [
        "suites/kubernetes.yaml",
        "suites/peer-rtt.yaml",
        "suites/single-vs-three-members.yaml",
        "suites/tls-put-concurrency-ladder.yaml",
        "suites/v2-benchmark-grid.yaml",
        "suites/version-compare.yaml",
        "suites/ycsb.yaml",
    ]
    result = run_suite("check", *suites)
    assert result.returncode == 0, result.stderr
    for suite in suites:
        assert f"{suite}: ok (" in result.stdout
        assert "; quick: " in result.stdout.split(f"{suite}: ok (")[1].splitlines()[0]
    # a ready suite's name, which names its default output directory, is its file's
    dry = run_suite("run", "suites/single-vs-three-members.yaml", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "output in out/suites/single-vs-three-members" in dry.stdout


def test_a_ready_suite_that_compares_has_the_repeats_its_rank_test_needs_to_call_a_row_worse():
    # with fewer runs a side than least_runs() the rank interval does not exist: every row same or inconclusive
    comparing = [path for path in sorted((REPO / "suites").glob("*.yaml")) if load_suite(path).compare is not None]
    assert [path.name for path in comparing] == ["version-compare.yaml"]
    for path in comparing:
        assert load_suite(path).repeats >= least_runs() == 4, path
    # its quick table tries the commands in a minute and decides nothing
    result = run_suite("run", "suites/version-compare.yaml", "--quick", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "2 combinations × 2 repeats = 4 runs of 3s" in result.stdout
    result = run_suite("run", "suites/version-compare.yaml", "--dry-run")
    assert "12 combinations × 4 repeats = 48 runs of 8s" in result.stdout


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("seed000", "single-vs-three-members"),
        ("seed001", "v2-benchmark-grid"),
        ("seed003", "tls-put-concurrency-ladder"),
    ],
)
def test_a_ready_suite_s_earlier_name_is_refused_with_one_line_naming_the_new_one(old, new):
    for command in ("run", "check"):
        result = run_suite(command, f"suites/{old}.yaml")
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr == f"locust-etcd: error: suites/{old}.yaml was renamed: use suites/{new}.yaml\n"


def test_a_misspelt_option_is_rejected_with_one_line_naming_it(tmp_path):
    suite = tmp_path / "x.yaml"
    suite.write_text("duration: 2\nusers: 1\nuser_class: EtcdPutUser\naxes:\n  key_sise: [64, 256]\n")
    result = run_suite("run", str(suite), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {suite}: axes.key_sise: unknown option (did you mean key-size?); known: ")
    assert not (tmp_path / "out").exists()


BASE = "duration: 2\nusers: 1\nuser_class: EtcdPutUser\n"
MALFORMED = {
    "unknown_key": ("durration: 2\nusers: 1\nuser_class: EtcdPutUser\n", "durration: unknown key"),
    "total": ("total: 100000\nusers: 1\nuser_class: EtcdPutUser\n", "total: not supported"),
    "wrong_type": (BASE + "fixed:\n  key-size: big\n", "fixed.key-size: expected a whole number, got 'big'"),
    "float_for_int": (BASE.replace("duration: 2", "duration: 2.5"), "duration: expected a whole number"),
    "bad_choice": (BASE + "axes:\n  target: [leader, random]\n", "axes.target[1]: 'random' is not one of"),
    "empty_axis": (BASE + "axes:\n  conns: []\n", "axes.conns: empty list"),
    "empty_axes": (BASE + "axes: {}\n", "axes: empty"),
    "unknown_fixed": (BASE + "fixed:\n  val_sise: 10\n", "fixed.val_sise: unknown option (did you mean val-size?)"),
    "unknown_class": (BASE.replace("EtcdPutUser", "EtcdPutUsr"), "user_class: 'EtcdPutUsr' is not a User class"),
    "axis_and_key": (BASE + "axes:\n  users: [1, 2]\n", "users: also an axis"),
    "fixed_and_axis": (BASE + "fixed:\n  conns: 2\naxes:\n  conns: [1, 2]\n", "axes.conns: also set in fixed.conns"),
    "members": (BASE + "members: 6\n", "members: 6 is not from 1 to 5"),
    "endpoints_in_fixed": (BASE + "fixed:\n  endpoints: http://127.0.0.1:2379\n", "fixed.endpoints: not allowed"),
    "linked_length": (BASE.replace("users: 1\n", "") + "axes:\n  users+conns: [[1, 1], [2]]\n", "axes.users+conns[1]"),
    "key_too_small": (BASE + "axes:\n  key-size: [8, 64]\n", "axes.key-size: combination key-size=8: --etcd-key-size"),
    "quick_unknown": (BASE + "quick:\n  durations: 1\n", "quick.durations: not allowed in quick"),
    "quick_new_axis": (BASE + "axes:\n  conns: [1, 2]\nquick:\n  axes:\n    target: [leader]\n", "quick.axes.target"),
    "duplicate_key": (BASE + "users: 2\n", "key 'users' appears twice"),
    "not_a_mapping": ("- duration\n", "expected a mapping"),
    # the options' own checks of what a value means, through the suite's keys
    "prefix_not_a_directory": (
        BASE + "fixed:\n  prefix: /locust-etcd\n",
        "fixed.prefix: --etcd-prefix: '/locust-etcd' does not end in '/', and etcd's prefix range of '/locust-etcd' "
        "also covers other applications' keys such as '/locust-etcd-sentinel'; give '/locust-etcd/'",
    ),
    "prefix_axis": (
        BASE + "axes:\n  prefix: [/a/, /b]\n",
        "axes.prefix: combination prefix=/b: --etcd-prefix: '/b' does not end in '/'",
    ),
    "nan_rate": (BASE + "fixed:\n  user-rate: .nan\n", "fixed.user-rate: --etcd-user-rate: nan is not a finite number"),
    "inf_timeout": (BASE + "fixed:\n  timeout: .inf\n", "fixed.timeout: --etcd-timeout: inf is not a finite number"),
    "huge_value": (BASE + "fixed:\n  val-size: 2000000000\n", "fixed.val-size: --etcd-val-size: a put of a 256-byte"),
    "empty_endpoint": (BASE + "endpoints: ','\n", "endpoints: ',' has an empty entry"),
    "processes_zero": (BASE + "processes: 0\n", "processes: 0 is not a whole number of processes, 1 or more"),
    "processes_text": (BASE + "processes: '2'\n", "processes: '2' is not a whole number of processes"),
    "processes_all_cores": (BASE + "processes: -1\n", "processes: -1 is not a whole number of processes"),
    "processes_idle": (
        BASE.replace("users: 1\n", "") + "axes:\n  users+processes: [[4, 2], [1, 2]]\n",
        "axes: combination users=1 processes=2: 2 processes for 1 users leave a process idle",
    ),
    "processes_key_and_axis": (BASE + "processes: 2\naxes:\n  processes: [1, 2]\n", "processes: also an axis"),
    # the local etcd's own options shape the cluster a suite starts for each run: not one of the user's
    "local_network_with_endpoints": (
        BASE + "endpoints: http://127.0.0.1:2379\nfixed:\n  local-peer-rtt: 10ms\n",
        "fixed.local-peer-rtt: sets the local etcd the suite starts for each run, and endpoints gives a cluster of "
        "your own; leave one of them out",
    ),
    "local_peer_rtt_bad": (
        BASE + "axes:\n  local-peer-rtt: [10ms, 10]\n",
        "axes.local-peer-rtt[1]: expected a string, got 10 (quote it in YAML)",
    ),
    "local_election_short": (
        BASE + "fixed:\n  local-heartbeat: 100\n  local-election: 200\n",
        "fixed.local-election: --etcd-local-election: 200 ms is less than 5 heartbeats of 100 ms",
    ),
    "local_binary_unknown": (
        BASE + "fixed:\n  local-binary: '9.9'\n",
        "fixed.local-binary: --etcd-local-binary: no etcd 9.9",
    ),
    # compare: one axis of one name and two values
    "compare_no_axis": (BASE + "axes:\n  conns: [1, 2]\ncompare:\n  changed: conns\n", "compare: missing axis"),
    "compare_unknown_key": (
        BASE + "axes:\n  conns: [1, 2]\ncompare:\n  axis: conns\n  baseline: 1\n",
        "compare.baseline: unknown key; known: axis, changed",
    ),
    "compare_not_an_axis": (
        BASE + "axes:\n  conns: [1, 2]\ncompare:\n  axis: target\n",
        "compare.axis: 'target' is not an axis of the suite; its axes: conns",
    ),
    "compare_three_values": (
        BASE + "axes:\n  conns: [1, 2, 3]\ncompare:\n  axis: conns\n",
        "compare.axis: conns has 3 values; compare takes an axis of two, the baseline first",
    ),
    "compare_linked": (
        BASE.replace("users: 1\n", "") + "axes:\n  users+conns: [[1, 1], [2, 2]]\ncompare:\n  axis: users+conns\n",
        "compare.axis: users+conns moves several settings together; compare an axis of one name",
    ),
    "compare_quick_one_value": (
        BASE + "axes:\n  conns: [1, 2]\ncompare:\n  axis: conns\nquick:\n  axes:\n    conns: [1]\n",
        "compare.axis: conns has 1 value; compare takes an axis of two",
    ),
}


def test_a_prefix_that_is_not_a_directory_is_refused_before_a_run(tmp_path):
    suite = tmp_path / "x.yaml"
    suite.write_text(BASE + "fixed:\n  prefix: /locust-etcd\n")
    result = run_suite("run", str(suite), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {suite}: fixed.prefix: --etcd-prefix: '/locust-etcd' does not end in '/', and etcd's prefix range of "
        "'/locust-etcd' also covers other applications' keys such as '/locust-etcd-sentinel'; give '/locust-etcd/'"
    ]
    assert not (tmp_path / "out").exists()


def test_malformed_suites_are_rejected_with_a_line_naming_the_key(tmp_path):
    files = []
    for name, (text, _) in MALFORMED.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        files.append(str(path))
    result = run_suite("check", *files)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = {line.split(": ", 2)[1]: line for line in result.stderr.splitlines()}
    for name, (_, expected) in MALFORMED.items():
        line = lines.get(str(tmp_path / f"{name}.yaml"))
        assert line is not None, f"{name}: no error line in\n{result.stderr}"
        assert expected in line, f"{name}: {line}"


# -- real runs -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_small_suite_runs_end_to_end_and_a_rerun_skips_finished_runs(small_suite):
    out, result = small_suite
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.count(" … ETA ") == 8
    assert result.stdout.count("    ok in ") == 8
    for prefix in SMALL_PREFIXES:
        assert int(aggregated(out / prefix)["Request Count"]) > 0, prefix
        assert (out / f"{prefix}.done").is_file()

    document = json.loads((out / "suite.json").read_text())
    assert document["schema"] == 1 and document["name"] == "small" and document["state"] == "finished"
    assert document["axis_names"] == ["users", "user_class"]
    assert [combo["id"] for combo in document["combinations"]] == SMALL_IDS
    runs = [run for combo in document["combinations"] for run in combo["runs"]]
    assert [run["prefix"] for run in runs] == SMALL_PREFIXES
    assert {run["status"] for run in runs} == {"done"}
    assert all(run["requests"] > 0 and not run["earlier"] for run in runs)
    combo = document["combinations"][1]
    assert combo["values"] == {"users": 2, "user_class": "SerializableRangeUser"}
    assert combo["options"]["key-space-size"] == 200 and combo["members"] == 1

    before = snapshot(out)
    again = run_suite("run", str(SMALL), "--out", str(out), timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("done earlier, skipped") == 8
    assert " … ETA " not in again.stdout
    assert snapshot(out) == before  # no Locust ran: no CSV, log or marker was written again
    rerun = json.loads((out / "suite.json").read_text())
    assert all(run["earlier"] for combo in rerun["combinations"] for run in combo["runs"])


@pytest.mark.slow
def test_a_failing_run_is_reported_and_the_suite_goes_on(tmp_path):
    suite = tmp_path / "unreachable.yaml"
    # port 9 (discard) has no etcd: Locust stops at start with locust-etcd's one-line error, exit code 2
    suite.write_text(
        "duration: 2\nusers: 1\nuser_class: EtcdPutUser\nendpoints: http://127.0.0.1:9\n"
        "fixed:\n  timeout: 1\naxes:\n  val-size: [10, 20]\ncompare:\n  axis: val-size\n"
    )
    out = tmp_path / "out"
    result = run_suite("run", str(suite), "--out", str(out), timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("FAILED after") == 2
    assert "locust exited with code 2" in result.stdout
    assert "locust-etcd: error: no etcd endpoint answered" in result.stdout
    assert "compare: not made while runs failed; run the suite again to redo them" in result.stdout
    assert not (out / "compare").exists()
    document = json.loads((out / "suite.json").read_text())
    runs = [run for combo in document["combinations"] for run in combo["runs"]]
    assert [run["status"] for run in runs] == ["failed", "failed"]
    assert "--etcd-cleanup" in runs[0]["command"]  # a shared cluster is cleaned after each run
    assert not list(out.rglob("*.done"))


@pytest.mark.slow
def test_ctrl_c_stops_the_current_run_and_its_etcd_and_keeps_finished_runs(tmp_path):
    out = tmp_path / "out"
    log = tmp_path / "suite.log"
    with open(log, "w") as log_file:
        runner = subprocess.Popen(
            suite_command("run", str(SMALL), "--out", str(out)),
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    second = out / SMALL_IDS[1] / "rep1.stderr"
    try:
        wait_for(lambda: second.is_file() and "All users spawned" in second.read_text(), 60, "the second run")
        runner.send_signal(signal.SIGINT)
        assert runner.wait(timeout=30) == 130, log.read_text()
    finally:
        if runner.poll() is None:
            kill_group(runner)
    output = log.read_text()
    assert "interrupted: 1/8 runs done" in output
    assert "Traceback" not in output
    assert processes_mentioning(f"--name suite-{runner.pid}-", str(out)) == []
    document = json.loads((out / "suite.json").read_text())
    assert document["state"] == "interrupted"
    statuses = {run["prefix"]: run["status"] for combo in document["combinations"] for run in combo["runs"]}
    assert statuses[SMALL_PREFIXES[0]] == "done" and statuses[f"{SMALL_IDS[1]}/rep1"] == "interrupted"
    assert (out / f"{SMALL_PREFIXES[0]}.done").is_file()
    assert not (out / f"{SMALL_IDS[1]}/rep1.done").exists()
