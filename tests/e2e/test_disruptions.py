"""``--etcd-disrupt`` under a steady put load: each action leaves a window in PREFIX_disruptions.json whose cost (gap,
P99, P99.9, requests, errors) is what the exact files say for that window; refusals are one line."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from checks import assert_no_traceback, refusal_line
from support import HEADLESS, headless_args, run_analysis, run_locust

from etcd_users.analysis.disruptions import per_second
from etcd_users.analysis.load import load_run
from etcd_users.judging.disruption_cost import cost, longest_gap
from etcd_users.judging.sla import SLA_EXIT_CODE

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMPARED = ("p99_before_ms", "p999_before_ms")  # the span's own figures come from the run's timeline, kept in no file


def windows(prefix: Path) -> list[dict]:
    document = json.loads(Path(f"{prefix}_disruptions.json").read_text())
    assert document["schema"] == 1
    return document["windows"]


def assert_cost_agrees_with_the_exact_files(prefix: Path, window: dict) -> None:
    """The live cost's figures of whole seconds, measured again from the hlog and the latency history; the span's
    within what its whole seconds hold."""
    data = per_second(load_run(str(prefix)))
    assert window["cost"], window
    for live in window["cost"]:
        seconds = data[live["name"]]
        exact = cost(live["name"], seconds, window["started_at"], window["finished_at"])._asdict()
        assert {key: live[key] for key in COMPARED} == {key: exact[key] for key in COMPARED}, window["item"]
        assert 0 < live["requests"], window["item"]  # the load went on: the window has data of its own
        assert live["gap_ms"] is not None, window["item"]
        gap_s = live["gap_ms"] / 1000.0
        # a run of N whole seconds without a success that starts in the window's seconds is a silence of N s at least
        # that overlaps the span; the span's silence may start before its first second or after its last one's start
        assert exact["gap_s"] <= gap_s + 1, (window["item"], exact, live)
        # and a silence of G s holds G - 1 whole seconds the files show without a success, among those it can reach
        reach = range(math.floor(window["started_at"] - gap_s) - 1, math.floor(window["finished_at"] + gap_s) + 2)
        silent = longest_gap(seconds, reach, min(reach.stop - 1, max(seconds)))  # not past the data's newest second
        assert silent >= math.floor(gap_s) - 1, (window["item"], live)


def test_a_defrag_of_the_leader_and_a_leader_move_under_load(etcd3, tmp_out):
    prefix = tmp_out / "run"
    schedule = "defrag:leader@3s,move-leader@6s"
    schedule_args = ("--etcd-disrupt", schedule, "--etcd-disrupt-allowed")
    # the cluster is shared by the session: a prefix of its own, cleaned up after
    own_keys = ("--etcd-prefix", "/disrupt-under-load/", "--etcd-cleanup")
    args = headless_args(etcd3, prefix, *schedule_args, *own_keys, users=8, seconds=12)
    result = run_locust(*args, "EtcdPutUser", timeout=90)
    assert_no_traceback(result.stdout + result.stderr)
    # 1: puts that the defragmenting or the outgoing leader held past their deadline failed, under their labels
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert f"{prefix}_disruptions.json" in result.stderr  # among the files written
    defrag, move = windows(prefix)
    assert (defrag["item"], defrag["ok"], move["item"], move["ok"]) == (
        "defrag:leader@3s",
        True,
        "move-leader:follower@6s",
        True,
    ), (defrag, move)
    assert defrag["result"] == f"defrag of {defrag['members'][0]} took " + defrag["result"].rsplit(" took ", 1)[1]
    old, new = move["members"]
    assert old != new and move["result"].startswith(f"leader moved from {old} to {new} in ")
    for window in (defrag, move):
        assert window["requested_at"] <= window["started_at"] <= window["finished_at"]
        assert_cost_agrees_with_the_exact_files(prefix, window)
        assert f"disruption {window['item']} cost: put: longest gap without a success" in result.stderr
    analysis = run_analysis(prefix, "--out", tmp_out / "analysis")
    assert analysis.returncode == 0, analysis.stderr
    assert "| defrag:leader@3s |" in analysis.stdout and "| move-leader:follower@6s |" in analysis.stdout
    assert (tmp_out / "analysis" / "disruptions.csv").is_file()


def test_a_follower_killed_and_a_leader_frozen_on_the_tool_s_own_cluster(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "8", "-r", "8", "-t", "16s", "--csv", str(prefix), "--etcd-local-members", "3")
    schedule = "kill:follower@3s+2s,freeze:leader@9s+3s"
    result = run_locust(*HEADLESS, *timing, "--etcd-disrupt", schedule, "EtcdPutUser", timeout=120)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: requests to the lost members failed
    kill, freeze = windows(prefix)
    assert freeze["ok"], freeze
    if kill["ok"]:
        assert " killed (SIGKILL), started again after " in kill["result"]
    else:
        # etcd 3.5 itself was seen to die while it started again after a SIGKILL (exit -11, twice in a row): the
        # window then says so, with the member's exit, and the run goes on with the other two
        assert "ClusterError: etcd member " in kill["error"] and " exited with code " in kill["error"], kill
    assert kill["finished_at"] - kill["started_at"] >= 2.0  # down for at least its duration
    assert " frozen (SIGSTOP) for " in freeze["result"]
    assert freeze["finished_at"] - freeze["started_at"] >= 3.0
    for window in (kill, freeze):
        assert_cost_agrees_with_the_exact_files(prefix, window)


def test_a_kill_on_endpoints_the_tool_did_not_start_is_refused_in_one_line(etcd1, tmp_out):
    args = headless_args(etcd1, tmp_out / "run", "--etcd-disrupt", "kill:leader@1s+1s", "--etcd-disrupt-allowed")
    line = refusal_line(run_locust(*args, "EtcdPutUser", timeout=60))
    assert line == (
        "locust-etcd: error: --etcd-disrupt: 'kill:leader@1s+1s' signals a member's process, which only the local "
        "etcd the tool starts allows; leave out --etcd-endpoints for a local cluster, or use defrag, move-leader, "
        "snapshot, compact, promote or remove"
    )


def test_a_disruption_on_given_endpoints_needs_the_allowance(etcd1, tmp_out):
    args = headless_args(etcd1, tmp_out / "run", "--etcd-disrupt", "defrag@1s")
    line = refusal_line(run_locust(*args, "EtcdPutUser", timeout=60))
    assert line.startswith("locust-etcd: error: --etcd-disrupt: the endpoints given are not the tool's own etcd; pass ")
    assert "--etcd-disrupt-allowed" in line


def gate_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("SLA ")]


def test_disrupt_gates_judge_each_window_and_a_failed_one_exits_3(tmp_out):
    prefix, report = tmp_out / "run", tmp_out / "junit.xml"
    timing = ("-u", "8", "-r", "8", "-t", "8s", "--csv", str(prefix), "--etcd-junit", str(report))
    gates = "disrupt:put:p99<1us,disrupt:gap<3600s"  # no P99 is below 1 µs, no gap an hour long
    result = run_locust(*HEADLESS, *timing, "--etcd-disrupt", "defrag:leader@3s", "--etcd-sla", gates, "EtcdPutUser")
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == SLA_EXIT_CODE, result.stderr[-3000:]
    (defrag,) = windows(prefix)
    (put,) = defrag["cost"]  # the gates judged the costs the file holds
    assert gate_lines(result.stderr) == [
        f"SLA disrupt defrag:leader@3s put p99 < 1us: {put['p99_ms'] * 1000:.0f}us FAIL",
        f"SLA disrupt defrag:leader@3s gap < 3600s: {put['gap_ms'] / 1000:g}s (put) PASS",
    ]
    assert "exit code 3: 1 of 2 gates failed (disrupt defrag:leader@3s put p99 < 1us) [3]" in result.stderr
    cases = ET.parse(report).getroot().iter("testcase")
    assert [(case.get("name"), case.find("failure") is not None) for case in cases] == [
        ("disrupt:put:p99<1us defrag:leader@3s", True),
        ("disrupt:gap<3600s defrag:leader@3s", False),
        ("audit", False),  # the end-of-run audit of a run that wrote
    ]


def test_disrupt_gates_that_hold_keep_the_run_s_exit_code(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "8", "-r", "8", "-t", "8s", "--csv", str(prefix))
    gates = "disrupt:p99<3600s,disrupt:gap<3600s"
    result = run_locust(*HEADLESS, *timing, "--etcd-disrupt", "defrag:leader@3s", "--etcd-sla", gates, "EtcdPutUser")
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a put the defragmentation held past its deadline
    (put,) = windows(prefix)[0]["cost"]
    assert gate_lines(result.stderr) == [
        f"SLA disrupt defrag:leader@3s p99 < 3600s: {put['p99_ms'] / 1000:.6f}s (put) PASS",
        f"SLA disrupt defrag:leader@3s gap < 3600s: {put['gap_ms'] / 1000:g}s (put) PASS",
    ]


def test_a_disrupt_gate_without_a_schedule_is_refused_at_start():
    result = run_locust(*HEADLESS, "-u", "1", "-t", "2s", "--etcd-sla", "disrupt:gap<2s", "EtcdPutUser", timeout=60)
    assert refusal_line(result) == (
        "locust-etcd: error: --etcd-sla: 'disrupt:gap<2s' judges each disruption, and --etcd-disrupt schedules none; "
        "add one such as --etcd-disrupt defrag:leader@60s, or drop the gate"
    )
    assert "started a local etcd" not in result.stderr  # refused before anything was started
