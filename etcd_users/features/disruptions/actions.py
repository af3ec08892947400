"""What each disruption does to the members: gRPC maintenance calls on the master's own connections, and signals
to the local etcd's processes. Each returns the members it acted on and one line of what happened.

Roles are resolved when the action starts, from each member's Status: the leader is the member every answering
member that names one names (``agreed_leader``, which a partition's window polls with every answering member naming
it); a follower is one that answers and is not it.
A member that does not answer (killed, frozen) is no follower to act on.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time

import gevent
from etcd3.etcdrpc import rpc_pb2

from etcd_users.features.disruptions.schedule import Disruption
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.target.action_table import ALL, FOLLOWER, LEADER
from etcd_users.transport.pool import EndpointPool, MemberStatus

logger = logging.getLogger("etcd_users.disruptions.actions")  # the name users' log filters know

STATUS_TIMEOUT_S = 2.0  # a frozen member answers nothing: ask it briefly
MAINTENANCE_TIMEOUT_S = 300.0  # a defragmentation or a snapshot of a large db takes minutes
MIB = 1024 * 1024


class ActionError(Exception):
    """An action that could not be done, in one line."""


class Done:
    """What an action did: the members, when it really started, and one line of result."""

    def __init__(self) -> None:
        self.members: list[str] = []
        self.started_at: float | None = None
        self.result = ""
        self.steps: list[dict] = []  # an upgrade's, a rollback's or a replacement's, one per member: its times

    def start(self) -> None:
        if self.started_at is None:
            self.started_at = time.time()


def agreed_leader(statuses: list[MemberStatus], everyone: bool = True) -> MemberStatus | None:
    """The member every answering member names as leader, when it answers too; None while they disagree. A member
    that names none (in an election, or cut off from the others) disagrees, unless not ``everyone`` need name it."""
    answering = [s for s in statuses if s.error is None]
    named = {s.leader_id for s in answering if everyone or s.leader_id}
    if len(named) != 1:
        return None
    leader = named.pop()
    return next((s for s in answering if leader and s.member_id == leader), None)


def leader_of(statuses: list[MemberStatus]) -> MemberStatus:
    """The leader the members that name one agree on, or ActionError: an action on the leader waits for no election,
    and a member cut off or in an election of its own does not stop an action on the others' leader."""
    leader = agreed_leader(statuses, everyone=False)
    if leader is None:
        answering = sum(s.error is None for s in statuses)
        raise ActionError(f"no leader that every answering member agrees on ({answering} of {len(statuses)} answer)")
    return leader


def _followers(statuses: list[MemberStatus]) -> list[MemberStatus]:
    leader = leader_of(statuses)
    followers = [s for s in statuses if s.error is None and s.member_id != leader.member_id]
    if not followers:
        raise ActionError("no follower answers")
    return followers


def resolve(member: str, statuses: list[MemberStatus]) -> list[MemberStatus]:
    """The members ``member`` (leader, follower, all or a client URL) names now."""
    if member == LEADER:
        return [leader_of(statuses)]
    if member == FOLLOWER:
        return _followers(statuses)[:1]
    if member == ALL:
        return list(statuses)
    named = [s for s in statuses if s.endpoint.url.rstrip("/") == member]
    if not named:
        raise ActionError(f"{member} is not among the endpoints")
    return named


def resolve_pair(source: str, target: str, statuses: list[MemberStatus]) -> tuple[MemberStatus, MemberStatus]:
    """The two members ``A->B`` names now, never one twice: B, when it is ``follower``, a follower other than A."""
    first = resolve(source, statuses)[0]
    if target == FOLLOWER:
        others = [s for s in _followers(statuses) if s.member_id != first.member_id]
        if not others:
            raise ActionError(f"no follower other than {first.endpoint.url} answers")
        second = others[0]
    else:
        second = resolve(target, statuses)[0]
    if second.member_id == first.member_id:
        raise ActionError(f"{source} and {target} are one member now ({first.endpoint.url})")
    return first, second


async def member_statuses(pool: EndpointPool) -> list[MemberStatus]:
    return await pool.status(STATUS_TIMEOUT_S)


def _connection(pool: EndpointPool, status: MemberStatus):
    return pool.connections[status.endpoint][0]


async def defrag(pool: EndpointPool, disruption: Disruption, done: Done) -> None:
    """Each member named, in turn."""
    times = []
    for status in resolve(disruption.member, await member_statuses(pool)):
        connection = _connection(pool, status)
        done.start()
        began = time.perf_counter()
        await connection.maintenance.Defragment(
            rpc_pb2.DefragmentRequest(), timeout=MAINTENANCE_TIMEOUT_S, metadata=connection.metadata
        )
        times.append(f"{status.endpoint.url} took {time.perf_counter() - began:.2f} s")
        done.members.append(status.endpoint.url)
    done.result = "defrag of " + ", then ".join(times)


async def move_leader(pool: EndpointPool, disruption: Disruption, done: Done) -> None:
    now = await member_statuses(pool)
    leader = leader_of(now)
    target = resolve(disruption.member, now)[0]
    if target.member_id == leader.member_id:
        raise ActionError(f"{target.endpoint.url} is the leader already")
    connection = _connection(pool, leader)
    done.start()
    began = time.perf_counter()
    request = rpc_pb2.MoveLeaderRequest(targetID=target.member_id)
    await connection.maintenance.MoveLeader(request, timeout=pool.settings.timeout, metadata=connection.metadata)
    done.members = [leader.endpoint.url, target.endpoint.url]
    done.result = (
        f"leader moved from {leader.endpoint.url} to {target.endpoint.url} in {time.perf_counter() - began:.2f} s"
    )


async def snapshot(pool: EndpointPool, disruption: Disruption, done: Done) -> None:
    """The member's whole db, streamed, counted and dropped."""
    status = resolve(disruption.member, await member_statuses(pool))[0]
    connection = _connection(pool, status)
    done.start()
    began = time.perf_counter()
    received = 0
    stream = connection.maintenance.Snapshot(
        rpc_pb2.SnapshotRequest(), timeout=MAINTENANCE_TIMEOUT_S, metadata=connection.metadata
    )
    async for chunk in stream:
        received += len(chunk.blob)
    done.members = [status.endpoint.url]
    done.result = f"snapshot of {status.endpoint.url}: {received / MIB:.1f} MiB in {time.perf_counter() - began:.2f} s"


async def compact(pool: EndpointPool, disruption: Disruption, done: Done) -> None:
    """At the cluster's revision minus the revisions to keep, physically (etcd answers once the pages are freed)."""
    status = leader_of(await member_statuses(pool))
    connection = _connection(pool, status)
    current = (
        await connection.maintenance.Status(
            rpc_pb2.StatusRequest(), timeout=pool.settings.timeout, metadata=connection.metadata
        )
    ).header.revision
    revision = current - disruption.keep
    if revision < 1:
        raise ActionError(f"the cluster is at revision {current}: nothing to compact keeping {disruption.keep}")
    done.start()
    began = time.perf_counter()
    await connection.kv.Compact(
        rpc_pb2.CompactionRequest(revision=revision, physical=True),
        timeout=MAINTENANCE_TIMEOUT_S,
        metadata=connection.metadata,
    )
    done.members = [status.endpoint.url]
    done.result = f"compaction at revision {revision} (of {current}) took {time.perf_counter() - began:.2f} s"


def _start_again(cluster: LocalCluster, index: int) -> str:
    """Start a stopped member; a member that dies while it starts (etcd 3.5 was seen to after a SIGKILL, exit -11)
    gets one more start, and the window says so: '' when the first start held."""
    try:
        cluster.start_member(index)
        return ""
    except ClusterError as error:
        logger.warning("disruption: member %d did not come back (%s); starting it once more", index, error)
        cluster.start_member(index)
        return f" (at the second start: the first ended with {error})"


def signal_member(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done) -> None:
    """kill, restart or freeze one member of the local etcd (the function of those actions in
    ``settings.disruption_actions``); it is back (started again or thawed) when this returns, also when the greenlet is
    killed on the way (the run stops)."""
    status = resolve(disruption.member, statuses)[0]
    url = status.endpoint.url
    index = cluster.endpoints.index(url)
    done.members = [url]
    action = disruption.action
    stop = {
        "freeze": cluster.pause_member,
        "kill": cluster.kill_member,
        "restart": cluster.stop_member,
    }.get(action)
    if stop is None:
        raise ActionError(f"{action} is not a signal to a member (kill, restart or freeze)")
    down = False
    try:
        done.start()
        began = time.perf_counter()
        stop(index)
        down = True
        stopped = time.perf_counter() - began
        gevent.sleep(disruption.duration)
        back = time.perf_counter()
        crashed = ""
        if action == "freeze":
            cluster.resume_member(index)
        else:
            crashed = _start_again(cluster, index)
        down = False
        if action == "freeze":
            done.result = f"{url} frozen (SIGSTOP) for {back - began:.2f} s"
        elif action == "kill":
            done.result = f"{url} killed (SIGKILL), started again after {back - began:.2f} s, healthy " + (
                f"{time.perf_counter() - back:.2f} s later{crashed}"
            )
        else:
            done.result = (
                f"{url} stopped (SIGTERM) in {stopped:.2f} s, started again after {back - began:.2f} s, healthy "
                f"{time.perf_counter() - back:.2f} s later{crashed}"
            )
    finally:
        if down:  # the run stops: the member comes back before the clean-up and the local etcd's end
            _bring_back(cluster, index, action)


def _bring_back(cluster: LocalCluster, index: int, action: str) -> None:
    if action == "freeze":
        if cluster.pids[index] is not None:
            cluster.resume_member(index)
    elif cluster.pids[index] is None:
        cluster.start_member(index)
