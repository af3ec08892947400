"""The per-process pool of gRPC connections: which member the next request goes to, leader discovery, failover.

``EndpointPool.next_connection`` chooses the connection of each request: the leader's (``--etcd-target leader``) or
the next in a rotation over every member that answers (``round-robin``). ``select`` makes that choice from each
member's Status, and makes it again whenever a call fails with a leader-lost or slow-member label.

A member that stops answering (frozen, partitioned) keeps its connections open and lets calls wait for their
deadline, and closed-loop users soon all wait on it. So a watchdog on the loop thread looks for a member whose calls
have had no answer for ``stall_seconds`` and looks again at once, with that short timeout: a member that does not
answer its Status leaves the rotation, its connections are replaced (the calls waiting on them end, as ``UNAVAILABLE``;
one that had already waited its whole deadline as ``DEADLINE_EXCEEDED``: ``errors.call_error``), and it is probed in
the background until it answers. With ``--etcd-target leader`` the users wait while the members
elect a new leader, and go to it as soon as the members name it.

Every coroutine here runs on the transport's loop thread; the pool's selection methods run on the gevent thread
and only read attributes that the loop thread replaces whole.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from etcd_users.settings import CLIENT_MAX_SEND_BYTES, Endpoint, EtcdSettings
from etcd_users.transport import learners, membership
from etcd_users.transport.errors import UNANSWERED_LABELS, EndpointError, call_error, error_detail, error_label
from etcd_users.transport.native import native_lock
from etcd_users.transport.wire import RawKV

logger = logging.getLogger(__name__)

# Large enough for a range over many keys; etcd bounds requests itself (1.5 MiB by default).
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", CLIENT_MAX_SEND_BYTES),
    # each channel its own TCP connection, as --etcd-conns promises
    ("grpc.use_local_subchannel_pool", 1),
)
_REDISCOVERY_INTERVAL = 0.2
# a paused member must not hold up finding the leader for a whole --etcd-timeout
_REDISCOVERY_TIMEOUT = 1.0
_RECHECK_DEAD_INTERVAL = 2.0
# A member whose calls have had no answer this long while others answer is looked at again (capped by a half timeout).
STALL_SECONDS = 1.0
_DEAD_STATUS_TIMEOUT = 0.25
_LEADER_POLL_SECONDS = 0.01


class Connection:
    """One gRPC channel to one endpoint, with its stubs and auth metadata.

    Each unary call is counted in and out with ``call_started`` and ``call_finished`` (on the thread that made it), for
    the pool's watchdog: ``pending`` is the calls in flight, ``answered_at`` when the last one was answered (or when the
    connection became busy), in ``time.perf_counter()`` seconds. ``generation`` counts the channels: a call made on an
    older one was abandoned.
    """

    def __init__(self, endpoint: Endpoint, channel: grpc.aio.Channel) -> None:
        self.endpoint = endpoint
        self.metadata: tuple = ()
        # users on greenlets count their calls on the gevent thread, the loop engine's on the loop thread: a run that
        # mixes them counts from both, one count at a time
        self._counting = native_lock()
        self.pending = 0
        self.answered_at = time.perf_counter()
        self.generation = 0
        self.use(channel)

    def use(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.raw_kv = RawKV(channel)  # bytes in and out: the ready workloads on the loop (etcd_users.features.engine)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        self.cluster = rpc_pb2_grpc.ClusterStub(channel)
        self.auth = rpc_pb2_grpc.AuthStub(channel)
        self.lease = rpc_pb2_grpc.LeaseStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)

    def call_started(self) -> int:
        """Count a call in; returns the token for its ``call_ended``."""
        with self._counting:
            if not self.pending:
                self.answered_at = time.perf_counter()  # idle until now: silence is counted from here
            self.pending += 1
            return self.generation

    def call_ended(self, token: int, answered: bool, at: float) -> bool:
        """Count out the call ``token`` came from; ``answered``: etcd replied at ``at`` (a response, or etcd's error).

        False when the pool replaced the channel under the call: the call was abandoned and its answer is not counted.
        """
        with self._counting:
            self.pending -= 1
            if token != self.generation:
                return False
            if answered:
                self.answered_at = at
            return True

    def call_finished(
        self, token: int, error: BaseException | None, seconds: float, ended: float, timeout: float
    ) -> BaseException | None:
        """Count out a finished call (``call_ended``) and return the error to report it with (``errors.call_error``):
        ``seconds`` from its start to its status at ``ended``, under a deadline of ``timeout`` seconds."""
        answered = error is None or error_label(error) not in UNANSWERED_LABELS  # etcd's own error is an answer
        current = self.call_ended(token, answered, ended)
        return call_error(error, not current, seconds, timeout)

    def stalled(self, now: float, after: float) -> bool:
        """Calls wait on this connection and none was answered for ``after`` seconds."""
        return self.pending > 0 and now - self.answered_at > after


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

    def __init__(self, settings: EtcdSettings, says_membership: bool = True) -> None:
        """``says_membership``: this pool logs the membership changes it follows (the users' pool; the master's own
        pools follow them quietly)."""
        self.settings = settings
        self.says_membership = says_membership
        self.endpoints: list[Endpoint] = list(settings.endpoints)  # those that take load (``follow_membership``)
        self._follows = settings.disruptions.changes_membership
        self.connections: dict[Endpoint, list[Connection]] = {}
        self.leader: Endpoint | None = None
        self.dead: frozenset[Endpoint] = frozenset()
        self.dead_since: dict[Endpoint, float] = {}  # time.perf_counter() when each dead member was left out
        # when requests began to fail for want of a leader or a member (time.perf_counter()); set on the gevent
        # thread by failing calls, or on the loop thread when the leader stops answering
        self.outage_started: float | None = None
        self.stall_seconds = min(STALL_SECONDS, settings.timeout / 2)
        self._next_connection = None
        # while the members elect a leader (--etcd-target leader): where a request goes if none is elected in time
        self._members_that_answer: Callable[[], Connection] | None = None
        self._reopened = 0  # streams opened again on another member: which one is next
        self._rediscovery: asyncio.Task | None = None
        self._recheck: asyncio.TimerHandle | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._membership_timer: asyncio.TimerHandle | None = None
        self._following: asyncio.Task | None = None
        self._channel_credentials = None
        self._closed = False
        self._last_discovery = 0.0
        self._last_warning = ""

    # loop thread

    async def open(self) -> None:
        """Open ``--etcd-conns`` channels per endpoint, choose where requests go, and authenticate."""
        credentials = self.settings.credentials
        if any(endpoint.secure for endpoint in self.endpoints):
            self._channel_credentials = grpc.ssl_channel_credentials(
                root_certificates=credentials.root_certificates,
                private_key=credentials.private_key,
                certificate_chain=credentials.certificate_chain,
            )
        for endpoint in self.endpoints:
            self._connect(endpoint)
        if self._follows:
            await self.follow_membership()
        await self.select(self.settings.timeout)
        if credentials.user:
            alive = [c for endpoint, cs in self.connections.items() if endpoint not in self.dead for c in cs]
            await asyncio.gather(*(self.authenticate(connection) for connection in alive))
        self._watch_for_stalls()
        if self._follows:
            self._follow_later()

    def _connect(self, endpoint: Endpoint) -> None:
        self.connections[endpoint] = [
            Connection(endpoint, self._new_channel(endpoint)) for _ in range(self.settings.conns)
        ]

    async def follow_membership(self) -> bool:
        """The endpoints that take load, from etcd's MemberList (``transport.membership``); whether they changed. A
        member added by the tool is connected (and authenticated) before it takes load."""
        members = await self.member_list()
        if members is None:
            return False
        given = list(self.settings.endpoints)
        if not membership.followed(given, members):
            if self.says_membership:
                logger.warning(
                    "etcd membership: the members advertise none of the endpoints given (%s) as their client URLs; "
                    "those take load whatever the membership",
                    given[0].url,
                )
            self._follows = False
            return False
        change = membership.change(given, self.endpoints, members, self.settings.disruptions.adds_members)
        if change is None:
            return False
        for endpoint in change.endpoints:
            if endpoint not in self.connections:
                self._connect(endpoint)
                if self.settings.credentials.user:
                    await asyncio.gather(*(self.authenticate(c) for c in self.connections[endpoint]))
        for line in change.lines if self.says_membership else ():
            logger.info(line)
        self.endpoints = change.endpoints
        return True

    async def member_list(self) -> list | None:
        """etcd's members (MemberList's, learners included), from the first member that answers within
        ``membership.TIMEOUT_S``, those left out last; None when none does."""
        for endpoint in [e for e in self.endpoints if e not in self.dead] or self.endpoints:
            connection = self.connections[endpoint][0]
            try:
                response = await learners.ClusterStub(connection.channel).MemberList(
                    learners.MemberListRequest(),
                    timeout=min(self.settings.timeout, membership.TIMEOUT_S),
                    metadata=connection.metadata,
                )
            except (grpc.aio.AioRpcError, asyncio.TimeoutError):
                continue
            return list(response.members)
        return None

    def _follow_later(self) -> None:
        if not self._closed and self._follows:
            loop = asyncio.get_running_loop()
            self._membership_timer = loop.call_later(membership.POLL_S, self._follow_now)

    def _follow_now(self) -> None:
        self._following = asyncio.get_running_loop().create_task(self._follow_and_select())

    async def _follow_and_select(self) -> None:
        try:
            if await self.follow_membership():
                await self._select_quietly(self.settings.timeout)
        except EndpointError as error:  # a new member that refused the user: said, and looked at again
            logger.warning("%s", error)
        finally:
            self._follow_later()

    def _new_channel(self, endpoint: Endpoint) -> grpc.aio.Channel:
        if endpoint.secure:
            return grpc.aio.secure_channel(endpoint.target, self._channel_credentials, options=_CHANNEL_OPTIONS)
        return grpc.aio.insecure_channel(endpoint.target, options=_CHANNEL_OPTIONS)

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
            # a member left out answers at once when it is back: a short wait keeps each look at the others short
            wait = min(timeout, _DEAD_STATUS_TIMEOUT) if endpoint in self.dead else timeout
            try:
                response = await connection.maintenance.Status(rpc_pb2.StatusRequest(), timeout=wait)
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
        now = time.perf_counter()
        for status in statuses:
            if status.endpoint in dead - self.dead:
                logger.warning("etcd endpoint %s does not answer (%s); skipping it", status.endpoint.url, status.error)
                self.dead_since[status.endpoint] = now
                self._abandon_calls(status.endpoint)
            elif status.endpoint in self.dead - dead:
                left_out = now - self.dead_since.pop(status.endpoint, now)
                logger.info("etcd endpoint %s answers again; using it (left out %.1fs)", status.endpoint.url, left_out)
        self.dead = dead
        if dead:  # look again later, to use the members that come back
            self._rediscover_later(_RECHECK_DEAD_INTERVAL)
        if self.settings.target == "leader":
            newest = max(alive, key=lambda status: status.raft_term)
            leader = next((s.endpoint for s in alive if s.member_id == newest.leader_id), None)
            if leader is None:
                problem, lost = await self._leader_not_given(newest)
                if not lost:
                    raise EndpointError(problem)
                if self._last_warning != problem:
                    logger.warning("%s; requests wait for the new leader", problem)
                    self._last_warning = problem
                self.leader = None
                self._members_that_answer = itertools.cycle(self._rotation(alive)).__next__
                self._next_connection = self._wait_for_leader(self._members_that_answer)
                self._rediscover_later(_REDISCOVERY_INTERVAL)
                self._last_discovery = time.monotonic()
                return
            if leader != self.leader:
                logger.info("etcd leader: %s", leader.url)
            self.leader = leader
            chosen = self.connections[leader]
        else:
            chosen = self._rotation(alive)
        self._members_that_answer = None
        self._next_connection = itertools.cycle(chosen).__next__
        self._last_discovery = time.monotonic()
        self._last_warning = ""

    def _wait_for_leader(self, members_that_answer: Callable[[], Connection]) -> Callable[[], Connection]:
        """``next_connection`` while the members elect a new leader: wait for it, up to ``--etcd-timeout``.

        A write sent to a member meanwhile would be forwarded to the lost leader and wait out etcd's own request
        timeout (about 7 s); a user's greenlet waits for the election instead, then goes to the new leader. With no
        leader after the timeout, the members that answer take the request (and say why it fails).
        """

        def next_connection() -> Connection:
            deadline = time.perf_counter() + self.settings.timeout
            while self.leader is None and not self._closed and time.perf_counter() < deadline:
                gevent.sleep(_LEADER_POLL_SECONDS)
            return members_that_answer() if self.leader is None else self._next_connection()

        return next_connection

    def _rotation(self, alive: list[MemberStatus]) -> list[Connection]:
        """Every connection of the members that answer, interleaved so that successive requests rotate over them."""
        per_endpoint = [self.connections[status.endpoint] for status in alive]
        return [c for group in itertools.zip_longest(*per_endpoint) for c in group if c is not None]

    def _abandon_calls(self, endpoint: Endpoint) -> None:
        """A member left out: replace its channels, so the calls that wait on it end now, not at their deadline."""
        waiting = [connection for connection in self.connections[endpoint] if connection.pending]
        if not waiting:
            return
        if self.settings.target == "leader" and self.outage_started is None:
            # the gap the users see began when the leader stopped answering, not when its calls are abandoned
            self.outage_started = min(connection.answered_at for connection in waiting)
        for connection in waiting:
            old = connection.channel
            connection.generation += 1
            connection.use(self._new_channel(endpoint))
            asyncio.get_running_loop().create_task(old.close())

    def _watch_for_stalls(self) -> None:
        """Every quarter of ``stall_seconds``: a member in the rotation whose calls went unanswered that long, while
        another member answered since (or the leader's alone), is looked at again at once, with that short timeout.

        "Answered since", not "answers now": closed-loop users soon all wait on the silent member, and then no
        other member gets a request to answer."""
        if self._closed:
            return
        now = time.perf_counter()
        after = self.stall_seconds
        in_use = [self.leader] if self.leader is not None else [e for e in self.endpoints if e not in self.dead]
        silent_since = {
            endpoint: min(c.answered_at for c in self.connections[endpoint] if c.stalled(now, after))
            for endpoint in in_use
            if any(c.stalled(now, after) for c in self.connections[endpoint])
        }
        last_answer = {endpoint: max(c.answered_at for c in self.connections[endpoint]) for endpoint in in_use}
        others_answered = any(
            last_answer[other] > since
            for endpoint, since in silent_since.items()
            for other in in_use
            if other != endpoint
        )
        if silent_since and (others_answered or self.leader is not None) and not self._looking():
            self._last_discovery = time.monotonic()
            self._rediscovery = asyncio.get_running_loop().create_task(self._select_quietly(after))
        self._watchdog = asyncio.get_running_loop().call_later(after / 4, self._watch_for_stalls)

    def _looking(self) -> bool:
        return self._rediscovery is not None and not self._rediscovery.done()

    async def _leader_not_given(self, status: MemberStatus) -> tuple[str, bool]:
        """Why no leader can take the requests; and whether it is ours and lost, so that an election follows."""
        if status.leader_id is None:
            return "no etcd leader: the cluster has not elected one", False
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
            return f"the etcd leader (member {status.leader_id:x}, {urls}) does not answer; waiting for a new one", True
        return (
            f"--etcd-target leader: the leader (member {status.leader_id:x}, {urls}) is not among --etcd-endpoints; "
            "add its client URL or use --etcd-target round-robin"
        ), False

    def rediscover(self) -> None:
        """Look for the leader (or the live members) again, once at a time and not too often."""
        if self._closed or self._looking():
            return
        wait = self._last_discovery + _REDISCOVERY_INTERVAL - time.monotonic()
        if wait > 0:
            self._rediscover_later(wait)  # not too often, but not dropped: a lost leader needs the next look
            return
        self._last_discovery = time.monotonic()
        self._rediscovery = asyncio.get_running_loop().create_task(self._select_quietly(_REDISCOVERY_TIMEOUT))

    async def _select_quietly(self, timeout: float) -> None:
        try:
            await self.select(min(self.settings.timeout, timeout))
        except EndpointError as error:
            if str(error) != self._last_warning:
                logger.warning("%s; trying again", error)
            self._last_warning = str(error)
            self._rediscover_later(_REDISCOVERY_INTERVAL)

    def _rediscover_later(self, delay: float) -> None:
        """One pending look at a time, and none once closed."""
        if self._recheck is not None:
            self._recheck.cancel()
        if not self._closed:
            self._recheck = asyncio.get_running_loop().call_later(delay, self.rediscover)

    def connection_on_loop(self) -> Connection | None:
        """``next_connection`` for a request made on the loop thread, which must not block: None while the members
        elect a leader (then ``await elected_connection()``)."""
        return self._next_connection() if self._members_that_answer is None else None

    async def elected_connection(self) -> Connection:
        """The loop thread's wait for a new leader, up to ``--etcd-timeout``, as ``next_connection`` waits on the
        gevent thread; with none by then, the members that answer take the request (and say why it fails)."""
        deadline = time.perf_counter() + self.settings.timeout
        while self.leader is None and not self._closed and time.perf_counter() < deadline:
            await asyncio.sleep(_LEADER_POLL_SECONDS)
        members = self._members_that_answer
        return members() if self.leader is None and members is not None else self._next_connection()

    async def close(self) -> None:
        # a closed pool must not look for members again: its timers would call closed channels, forever
        self._closed = True
        for timer in (self._recheck, self._watchdog, self._membership_timer):
            if timer is not None:
                timer.cancel()
        for task in (self._rediscovery, self._following):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(c.channel.close() for cs in self.connections.values() for c in cs))

    # gevent thread

    def next_connection(self) -> Connection:
        return self._next_connection()

    def another_connection(self, than: Connection) -> Connection:
        """A connection to a member other than ``than``'s, among those not left out as dead, for a stream that broke to
        open again on; ``than`` when there is no other. Any thread: it neither waits nor asks etcd."""
        others = [
            group
            for endpoint, group in self.connections.items()
            if endpoint != than.endpoint and endpoint in self.endpoints
        ]
        others = [group for group in others if group[0].endpoint not in self.dead] or others
        if not others:
            return than
        self._reopened += 1
        group = others[self._reopened % len(others)]
        return group[self._reopened // len(others) % len(group)]

    def begin_outage(self, label: str) -> None:
        if self.outage_started is None:
            self.outage_started = time.perf_counter()
            logger.warning("etcd: requests fail with %r; looking for the leader and live members again", label)

    def end_outage(self, ended: float) -> None:
        """Say how long requests failed for want of a leader or a member: the failover gap seen by the client, from
        the first failure (or the moment a lost leader stopped answering) to the first success after it."""
        started = self.outage_started
        if started is None or ended < started:
            return  # a success from before the outage, reported late
        self.outage_started = None
        logger.warning("etcd: requests succeed again %.2fs after the first failure", ended - started)
