"""The per-process pool of gRPC connections: which member the next request goes to, leader discovery, failover.

``EndpointPool.next_connection`` chooses the connection of each request: the leader's (``--etcd-target leader``) or
the next in a rotation over every member that answers (``round-robin``). ``select`` makes that choice from each
member's Status, and makes it again whenever a call fails with a leader-lost or slow-member label.

Every coroutine here runs on the transport's loop thread; the pool's selection methods run on the gevent thread
and only read attributes that the loop thread replaces whole.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass

import grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from etcd_users.settings import Endpoint, EtcdSettings
from etcd_users.transport.errors import EndpointError, error_detail

logger = logging.getLogger(__name__)

# Large enough for a range over many keys; etcd bounds requests itself (1.5 MiB by default).
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    # each channel its own TCP connection, as --etcd-conns promises
    ("grpc.use_local_subchannel_pool", 1),
)
_REDISCOVERY_INTERVAL = 0.2
# a paused member must not hold up finding the leader for a whole --etcd-timeout
_REDISCOVERY_TIMEOUT = 1.0
_RECHECK_DEAD_INTERVAL = 2.0


class Connection:
    """One gRPC channel to one endpoint, with its stubs and auth metadata."""

    def __init__(self, endpoint: Endpoint, channel: grpc.aio.Channel) -> None:
        self.endpoint = endpoint
        self.channel = channel
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        self.cluster = rpc_pb2_grpc.ClusterStub(channel)
        self.auth = rpc_pb2_grpc.AuthStub(channel)
        self.lease = rpc_pb2_grpc.LeaseStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)
        self.metadata: tuple = ()


@dataclass(frozen=True)
class MemberStatus:
    endpoint: Endpoint
    member_id: int | None
    leader_id: int | None
    raft_term: int
    version: str
    error: str | None


class EndpointPool:
    """The gRPC connections of one process, and which of them the next request uses."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self.endpoints: list[Endpoint] = list(settings.endpoints)
        self.connections: dict[Endpoint, list[Connection]] = {}
        self.leader: Endpoint | None = None
        self.dead: frozenset[Endpoint] = frozenset()
        # gevent thread: when requests began to fail for want of a leader or a member (time.monotonic())
        self.outage_started: float | None = None
        self._next_connection = None
        self._rediscovery: asyncio.Task | None = None
        self._recheck: asyncio.TimerHandle | None = None
        self._closed = False
        self._last_discovery = 0.0
        self._last_warning = ""

    # loop thread

    async def open(self) -> None:
        """Open ``--etcd-conns`` channels per endpoint, choose where requests go, and authenticate."""
        credentials = self.settings.credentials
        channel_credentials = None
        if any(endpoint.secure for endpoint in self.endpoints):
            channel_credentials = grpc.ssl_channel_credentials(
                root_certificates=credentials.root_certificates,
                private_key=credentials.private_key,
                certificate_chain=credentials.certificate_chain,
            )
        for endpoint in self.endpoints:
            connections = []
            for _ in range(self.settings.conns):
                if endpoint.secure:
                    channel = grpc.aio.secure_channel(endpoint.target, channel_credentials, options=_CHANNEL_OPTIONS)
                else:
                    channel = grpc.aio.insecure_channel(endpoint.target, options=_CHANNEL_OPTIONS)
                connections.append(Connection(endpoint, channel))
            self.connections[endpoint] = connections
        await self.select(self.settings.timeout)
        if credentials.user:
            alive = [c for endpoint, cs in self.connections.items() if endpoint not in self.dead for c in cs]
            await asyncio.gather(*(self.authenticate(connection) for connection in alive))

    async def authenticate(self, connection: Connection) -> None:
        """Get a token for ``connection`` (etcd gives one per Authenticate; it expires when unused)."""
        credentials = self.settings.credentials
        try:
            response = await connection.auth.Authenticate(
                rpc_pb2.AuthenticateRequest(name=credentials.user, password=credentials.password),
                timeout=self.settings.timeout,
            )
        except grpc.aio.AioRpcError as error:
            # never the password: only the user name goes into the message
            raise EndpointError(
                f"--etcd-user: {connection.endpoint.url} refused user {credentials.user!r} ({error_detail(error)}); "
                "check the name and password"
            ) from None
        connection.metadata = (("token", response.token),)

    async def status(self, timeout: float) -> list[MemberStatus]:
        """Each endpoint's own view: its member id, the leader it knows, its version; or why it did not answer."""

        async def one(endpoint: Endpoint) -> MemberStatus:
            connection = self.connections[endpoint][0]
            try:
                response = await connection.maintenance.Status(rpc_pb2.StatusRequest(), timeout=timeout)
            except (grpc.aio.AioRpcError, asyncio.TimeoutError) as error:
                return MemberStatus(endpoint, None, None, 0, "", error_detail(error))
            leader = response.leader or None
            return MemberStatus(endpoint, response.header.member_id, leader, response.raftTerm, response.version, None)

        return list(await asyncio.gather(*(one(endpoint) for endpoint in self.endpoints)))

    async def select(self, timeout: float) -> None:
        """Point the rotation at the leader, or at every endpoint that answers."""
        statuses = await self.status(timeout)
        alive = [status for status in statuses if status.error is None]
        if not alive:
            reasons = "; ".join(f"{s.endpoint.url}: {s.error}" for s in statuses)
            raise EndpointError(
                f"no etcd endpoint answered within {timeout:g}s ({reasons}); "
                "check --etcd-endpoints, --etcd-cacert, --etcd-cert and --etcd-key (when etcd asks for a client "
                "certificate) and that etcd runs there"
            )
        dead = frozenset(status.endpoint for status in statuses if status.error is not None)
        for status in statuses:
            if status.endpoint in dead - self.dead:
                logger.warning("etcd endpoint %s does not answer (%s); skipping it", status.endpoint.url, status.error)
            elif status.endpoint in self.dead - dead:
                logger.info("etcd endpoint %s answers again; using it", status.endpoint.url)
        self.dead = dead
        if dead:  # look again later, to use the members that come back
            self._rediscover_later(_RECHECK_DEAD_INTERVAL)
        if self.settings.target == "leader":
            newest = max(alive, key=lambda status: status.raft_term)
            leader = next((s.endpoint for s in alive if s.member_id == newest.leader_id), None)
            if leader is None:
                raise EndpointError(await self._leader_not_given(newest))
            if leader != self.leader:
                logger.info("etcd leader: %s", leader.url)
            self.leader = leader
            chosen = self.connections[leader]
        else:
            # interleave endpoints so that successive requests rotate over every member
            per_endpoint = [self.connections[status.endpoint] for status in alive]
            chosen = [c for group in itertools.zip_longest(*per_endpoint) for c in group if c is not None]
        self._next_connection = itertools.cycle(chosen).__next__
        self._last_discovery = time.monotonic()

    async def _leader_not_given(self, status: MemberStatus) -> str:
        if status.leader_id is None:
            return "no etcd leader: the cluster has not elected one"
        connection = self.connections[status.endpoint][0]
        urls = "unknown URLs"
        try:
            members = await connection.cluster.MemberList(
                rpc_pb2.MemberListRequest(), timeout=self.settings.timeout, metadata=connection.metadata
            )
            leader_urls = [url for m in members.members if m.ID == status.leader_id for url in m.clientURLs]
            urls = ", ".join(leader_urls)
        except grpc.aio.AioRpcError:
            leader_urls = []
        if any(endpoint.url in leader_urls for endpoint in self.dead):
            # the members still name the leader they lost; an election follows
            return f"the etcd leader (member {status.leader_id:x}, {urls}) does not answer; waiting for a new one"
        return (
            f"--etcd-target leader: the leader (member {status.leader_id:x}, {urls}) is not among --etcd-endpoints; "
            "add its client URL or use --etcd-target round-robin"
        )

    def rediscover(self) -> None:
        """Look for the leader (or the live members) again, once at a time and not too often."""
        if self._closed or (self._rediscovery is not None and not self._rediscovery.done()):
            return
        if time.monotonic() - self._last_discovery < _REDISCOVERY_INTERVAL:
            return
        self._last_discovery = time.monotonic()
        self._rediscovery = asyncio.get_running_loop().create_task(self._select_quietly())

    async def _select_quietly(self) -> None:
        try:
            await self.select(min(self.settings.timeout, _REDISCOVERY_TIMEOUT))
        except EndpointError as error:
            if str(error) != self._last_warning:
                logger.warning("%s; trying again", error)
            self._last_warning = str(error)
            self._rediscover_later(_REDISCOVERY_INTERVAL)
        else:
            self._last_warning = ""

    def _rediscover_later(self, delay: float) -> None:
        """One pending look at a time, and none once closed."""
        if self._recheck is not None:
            self._recheck.cancel()
        if not self._closed:
            self._recheck = asyncio.get_running_loop().call_later(delay, self.rediscover)

    async def close(self) -> None:
        # a closed pool must not look for members again: its timers would call closed channels, forever
        self._closed = True
        if self._recheck is not None:
            self._recheck.cancel()
        if self._rediscovery is not None and not self._rediscovery.done():
            self._rediscovery.cancel()
        await asyncio.gather(*(c.channel.close() for cs in self.connections.values() for c in cs))

    # gevent thread

    def next_connection(self) -> Connection:
        return self._next_connection()

    def begin_outage(self, label: str) -> None:
        if self.outage_started is None:
            self.outage_started = time.monotonic()
            logger.warning("etcd: requests fail with %r; looking for the leader and live members again", label)

    def end_outage(self) -> None:
        """Say how long requests failed for want of a leader or a member: the failover gap seen by the client."""
        gap = time.monotonic() - self.outage_started
        logger.warning("etcd: requests succeed again %.2fs after the first failure", gap)
        self.outage_started = None
