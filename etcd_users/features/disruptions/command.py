"""exec: a command of the user's run as a disruption window, on the master (or single process), never on a worker.

The command runs without a shell, in a session of its own (so that a timeout stops what it started too), its output
(stdout and stderr together) read by a greenlet of its own: gevent's subprocess, the loop never blocks. The window is
its run; its exit status and its last lines of output are the window's result, a non-zero exit fails it. Past its
timeout (+DURATION) it gets SIGTERM, then SIGKILL after ``STOP_GRACE_S``; the run's stop does the same.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import collections
import os
import shlex
import signal
import time

import gevent
from gevent import subprocess

from etcd_users.features.disruptions.actions import ActionError, Done
from etcd_users.features.disruptions.schedule import Disruption

STOP_GRACE_S = 5.0  # from SIGTERM to SIGKILL
TAIL_LINES = 5  # the last lines of output a window keeps
LINE_CHARACTERS = 200
LINE_JOIN = " ⏎ "  # the lines in one line: the window's result is one line everywhere it shows


def _tail(lines: collections.deque) -> str:
    kept = [line[:LINE_CHARACTERS] for line in lines if line.strip()]
    return f"; last output: {LINE_JOIN.join(kept)}" if kept else "; no output"


def _read(stream, lines: collections.deque) -> None:
    for raw in iter(stream.readline, b""):
        lines.append(raw.decode(errors="replace").rstrip())


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass  # it ended on its own in the meantime


def _stop(process: subprocess.Popen) -> str:
    """SIGTERM to the command's session, SIGKILL after the grace; which one ended it."""
    _signal(process, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
        return "SIGTERM"
    except subprocess.TimeoutExpired:
        _signal(process, signal.SIGKILL)
        process.wait()
        return f"SIGKILL, {STOP_GRACE_S:g} s after a SIGTERM it did not end on"


def run_command(command: tuple[str, ...], endpoints: list[str], disruption: Disruption, done: Done) -> None:
    """Run ``command`` (its words) until it exits or its timeout (``disruption.duration``, 0: none) passes."""
    name = disruption.member
    environment = {**os.environ}
    environment.setdefault("ETCDCTL_ENDPOINTS", ",".join(endpoints))
    lines: collections.deque = collections.deque(maxlen=TAIL_LINES)
    done.start()
    began = time.perf_counter()
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    except OSError as error:
        done.result = f"{name}: {shlex.join(command)} did not start: {error.strerror or error}"
        raise ActionError(f"did not start: {error.strerror or error}") from None
    reader = gevent.spawn(_read, process.stdout, lines)
    stopped_by = ""
    try:
        process.wait(timeout=disruption.duration or None)
    except subprocess.TimeoutExpired:
        stopped_by = _stop(process)
    finally:
        if process.returncode is None:  # the run stops: the command goes with it
            _stop(process)
        reader.join(timeout=STOP_GRACE_S)
        process.stdout.close()
    took = time.perf_counter() - began
    status = process.returncode
    if stopped_by:
        done.result = f"{name} ran past its timeout of {disruption.duration:g} s: stopped by {stopped_by} after "
        done.result += f"{took:.2f} s{_tail(lines)}"
        raise ActionError(f"stopped at its timeout of {disruption.duration:g} s ({stopped_by.split(',')[0]})")
    done.result = f"{name} exited with status {status} after {took:.2f} s{_tail(lines)}"
    if status != 0:
        raise ActionError(f"exit status {status}")
