"""The members' processes: starting one, waiting until members are healthy, stopping them."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence

from etcd_users.local.errors import ClusterError
from etcd_users.local.logs import log_reason, log_tail
from etcd_users.local.member import Member
from etcd_users.local.probes import is_healthy, is_leader

STOP_GRACE_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


class PortTaken(ClusterError):
    """A member could not bind its port (LocalCluster.start() retries once with new ports)."""


def spawn(member: Member, command: Sequence[str]) -> None:
    """Run ``command`` as ``member``'s process, its output appended to the member's log.

    The start runs to its end in a greenlet of its own: a greenlet killed while its process forks and execs (a run
    that stops while a disruption starts a member) would otherwise leave an etcd on the member's ports that the member
    does not know, and the next start would find them taken."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("subprocess"):  # the suite runner: a start that never yields
        _start_process(member, command)
        return
    import gevent  # here: the suite runner and the analysis load this package without gevent

    starting = gevent.spawn(_start_process, member, command)
    try:
        starting.get()
    except gevent.GreenletExit:
        starting.join()
        raise


def _start_process(member: Member, command: Sequence[str]) -> None:
    if member.log_file is not None:
        member.log_file.close()
    member.log_file = open(member.log_path, "ab")  # open as long as the member runs
    setpriv = shutil.which("setpriv")
    member.process = subprocess.Popen(
        # setpriv sets the death signal and execs etcd: no ctypes call in the forked child of a process whose gRPC
        # threads may hold locks (a member started again mid-run was seen to die at once, SIGSEGV)
        [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else list(command),
        stdin=subprocess.DEVNULL,
        stdout=member.log_file,
        stderr=subprocess.STDOUT,
        env=_etcd_environment(),
        # Own session: a Ctrl-C in the terminal reaches us, and we stop the members in order.
        start_new_session=True,
        preexec_fn=None if setpriv else _die_with_parent(),
    )
    member.paused = False


def wait_healthy(members: Sequence[Member], indexes: Iterable[int], deadline: float, timeout: float) -> None:
    """Wait until each of ``members[indexes]`` reports healthy; PortTaken or ClusterError (with its log) if not."""
    pending = list(indexes)
    while pending:
        for index in list(pending):
            member = members[index]
            if member.process.poll() is not None:
                if "address already in use" in log_tail(member.log_path):
                    raise PortTaken(f"etcd member {index}: {log_reason(member.log_path)}")
                raise ClusterError(
                    f"etcd member {index} exited with code {member.process.returncode}: "
                    f"{log_reason(member.log_path)} (log: {member.log_path})\n{log_tail(member.log_path)}"
                )
            if is_healthy(member):
                pending.remove(index)
        if not pending:
            return
        if time.monotonic() >= deadline:
            member = members[pending[0]]
            raise ClusterError(
                f"etcd member {pending[0]} ({member.client_url}) not healthy after {timeout:g}s: "
                f"{log_reason(member.log_path)} (log: {member.log_path})\n{log_tail(member.log_path)}"
            )
        time.sleep(0.1)


def terminate_leader_last(members: Sequence[Member]) -> None:
    """Stop every member, the leader after its followers."""
    # A leader stopped together with its followers waits seconds for a leadership transfer that cannot
    # happen; stopping the followers first lets it exit at once.
    responsive = [member for member in members if member.is_running() and not member.paused]
    leaders = [member for member in responsive if is_leader(member)] if len(responsive) > 1 else []
    if len(leaders) == 1:
        terminate([member for member in members if member is not leaders[0]])
    terminate(members)


def terminate(members: Sequence[Member]) -> None:
    """SIGTERM ``members`` and wait for them to exit (SIGKILL after a grace period)."""
    running = [member for member in members if member.is_running()]
    for member in running:
        member.process.terminate()
        member.process.send_signal(signal.SIGCONT)  # a paused member only handles SIGTERM once resumed
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for member in running:
        try:
            member.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            member.process.kill()
            member.process.wait()
    for member in members:
        member.paused = False
        if member.log_file is not None:
            member.log_file.close()
            member.log_file = None


def _etcd_environment() -> dict[str, str]:
    # etcd reads ETCD_* variables as flags; a variable meant for another etcd must not leak into the members.
    return {key: value for key, value in os.environ.items() if not key.startswith("ETCD_")}


def _die_with_parent():
    """A preexec_fn that makes the child receive SIGKILL when the parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: preexec_fn must stay minimal
    parent_pid = os.getpid()

    def set_parent_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent already died before prctl took effect
            os._exit(1)

    return set_parent_death_signal
