"""exec under a put load on the tool's own etcd: each command's run is a window with its duration, exit status and
last output; a failed exit and a timeout fail it and say so; refusals are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checks import assert_no_traceback, refusal_line
from support import HEADLESS, headless_args, run_analysis, run_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GENEROUS_S = 10.0  # a busy machine may start a process slowly: an upper bound far from the command's own time


def windows(prefix: Path) -> dict[str, dict]:
    document = json.loads(Path(f"{prefix}_disruptions.json").read_text())
    return {window["item"]: window for window in document["windows"]}


def test_exec_windows_carry_the_command_s_run_its_status_and_a_timeout(tmp_out):
    prefix = tmp_out / "run"
    schedule = "exec:nap@1s,exec:fail@2s,exec:hang@3s+1s"
    commands = ("nap=sleep 0.5", "fail=sh -c 'echo first; echo last >&2; exit 3'", "hang=sleep 30")
    args = ("-u", "4", "-r", "4", "-t", "10s", "--csv", str(prefix), "--etcd-disrupt", schedule)
    for command in commands:
        args += ("--etcd-disrupt-command", command)
    result = run_locust(*HEADLESS, *args, "--etcd-disrupt-allowed", "EtcdPutUser", timeout=120)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]  # a failed window fails only a disrupt: gate
    by_item = windows(prefix)
    nap, fail, hang = by_item["exec:nap@1s"], by_item["exec:fail@2s"], by_item["exec:hang@3s+1s"]

    assert nap["ok"] is True and nap["error"] == ""
    assert 0.5 <= nap["finished_at"] - nap["started_at"] < GENEROUS_S
    assert nap["result"].startswith("nap exited with status 0 after ") and nap["result"].endswith("; no output")

    assert fail["ok"] is False and fail["error"] == "exit status 3"
    assert fail["result"].startswith("fail exited with status 3 after ")
    assert fail["result"].endswith("; last output: first ⏎ last")
    assert f"disruption exec:fail@2s failed: exit status 3 ({fail['result']})" in result.stderr

    assert hang["ok"] is False and hang["error"] == "stopped at its timeout of 1 s (SIGTERM)"
    assert hang["result"].startswith("hang ran past its timeout of 1 s: stopped by SIGTERM after ")
    assert 1.0 <= hang["finished_at"] - hang["started_at"] < GENEROUS_S  # stopped, not left to its 30 s

    for window in (nap, fail, hang):
        assert window["cost"] and window["cost"][0]["requests"] > 0, window  # measured like any other window
    analysis = run_analysis(prefix, "--out", tmp_out / "analysis")
    assert analysis.returncode == 0, analysis.stderr
    assert "| no: exit status 3 |" in analysis.stdout
    assert "exec:hang@3s+1s" in (tmp_out / "analysis" / "disruptions.csv").read_text()


def test_a_failed_exec_fails_a_disrupt_gate(tmp_out):
    prefix = tmp_out / "run"
    args = ("-u", "2", "-r", "2", "-t", "5s", "--csv", str(prefix), "--etcd-disrupt", "exec:fail@1s")
    args += ("--etcd-disrupt-command", "fail=false", "--etcd-disrupt-allowed", "--etcd-sla", "disrupt:gap<3600s")
    result = run_locust(*HEADLESS, *args, "EtcdPutUser", timeout=90)
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 3, result.stderr[-3000:]
    assert windows(prefix)["exec:fail@1s"]["error"] == "exit status 1"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--etcd-disrupt", "exec:nap@1s", "--etcd-disrupt-command", "nap=sleep 1"),
            "--etcd-disrupt: 'exec:nap@1s' runs a command of your own, outside the tool; pass --etcd-disrupt-allowed",
        ),
        (
            ("--etcd-disrupt", "exec:nap@1s", "--etcd-disrupt-allowed"),
            "--etcd-disrupt: 'exec:nap@1s' names the command 'nap', and none is defined; add --etcd-disrupt-command",
        ),
        (
            ("--etcd-disrupt", "exec:a@1s", "--etcd-disrupt-command", "a=true", "--etcd-disrupt-command", "a=false"),
            "--etcd-disrupt-command: a is defined twice; give each command a name of its own",
        ),
        (
            ("--etcd-disrupt-command", "unused=true"),
            "--etcd-disrupt-command: unused is never run; run it with --etcd-disrupt 'exec:unused@TIME'",
        ),
        (("--etcd-disrupt", "exec:a@1s", "--etcd-disrupt-command", "a="), "--etcd-disrupt-command: 'a=' has an empty"),
    ],
)
def test_each_refused_exec_is_one_line(etcd1, tmp_out, args, line):
    refused = refusal_line(run_locust(*headless_args(etcd1, tmp_out / "run", *args), "EtcdPutUser", timeout=60))
    assert refused.startswith(f"locust-etcd: error: {line}"), refused
