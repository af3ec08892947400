"""Every command the documentation shows runs: a quick variant of each, in page order, against the local etcd the tool
starts itself (see ``tests/docs_commands.py`` for how commands are found and shortened).

A command in a block marked ``<!-- needs a real cluster -->`` or ``<!-- a measurement of minutes -->`` is not run; a
command whose executable, module or file does not exist yet is skipped with a reason naming it. Each run must exit with
a code that means success for it (0, or 3 when it was judged by SLA gates or searched a capacity: a verdict is a
measurement, not a failure) and print no traceback (a Kubernetes run may also exit 1 when its only failures are write
conflicts, as in a real cluster).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from docs_commands import REPO, Command, Run, all_commands, quick_variant

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RUN_TIMEOUT = 180  # seconds for one run: far above any quick variant, so only a hung run reaches it
COMMANDS = [c for c in all_commands() if not c.marked and not c.text.startswith("echo ")]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("docs") / "out"
    directory.mkdir()
    return directory


@pytest.fixture(scope="module")
def already_run() -> dict[tuple[str, ...], str]:
    return {}


def reads_missing_output(run: Run, out: Path) -> str:
    """An analysis of files that no earlier command wrote (its maker was skipped): the output it misses."""
    if run.argv[1:3] not in (["-m", "analysis"], ["-m", "etcd_users.analysis"]):
        return ""
    after_out = False
    for arg in run.argv[3:]:
        if after_out or arg == "--out":  # the report's own directory is written, not read
            after_out = arg == "--out"
            continue
        if arg.startswith(f"{out}/") and not glob.glob(f"{arg}*"):  # a prefix, its files or a glob of repeats
            return f"no earlier command wrote {arg.replace(str(out), 'out', 1)}"
    return ""


def _stop_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def execute(run: Run) -> tuple[int, str]:
    env = {**os.environ, **run.env}
    # a session of its own: a run's forked workers that outlive it are stopped with it, not left holding the pipes
    process = subprocess.Popen(
        run.argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    if not run.serves_until:
        try:
            output, _ = process.communicate(timeout=RUN_TIMEOUT)
        finally:
            _stop_group(process)
        return process.returncode, output
    lines = []
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        for line in process.stdout:
            lines.append(line)
            if run.serves_until in line or time.monotonic() > deadline:
                break
    finally:
        process.terminate()
        rest, _ = process.communicate(timeout=60)
        lines.append(rest or "")
        _stop_group(process)
    up = any(run.serves_until in line for line in lines)
    return (0 if up else 1), "".join(lines)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_a_documented_command_runs(command: Command, out: Path, already_run: dict[tuple[str, ...], str]):
    plan = quick_variant(command, out)
    if plan.skip:
        pytest.skip(f"{command.where}: {plan.skip}: {command.text}")
    for run in plan.runs:
        key = tuple(a for a in run.argv if "prometheus-port" not in a)
        if key in already_run:
            pytest.skip(f"{command.where}: the same run as {already_run[key]}")
        missing = reads_missing_output(run, out)
        if missing:
            pytest.skip(f"{command.where}: {missing}")
        code, output = execute(run)
        already_run[key] = command.where
        shown = f"{command.where}: {' '.join(run.argv)}\n{output[-4000:]}"
        assert code in run.ok_codes, shown
        if code == 1:  # only the tolerated failures: every row of Locust's error report has its label
            failures = re.findall(r"^\s*\d+\s+etcd .*$", output, flags=re.MULTILINE)
            assert failures and all(run.tolerated in line for line in failures), shown
        assert "Traceback" not in output, shown
