"""replace: a member of the local etcd replaced after a disk failure, as etcd's robustness tests do (MemberReplace).

The member's process is killed (SIGKILL: a failed disk gives etcd no graceful stop, and a leader stopped by SIGTERM
would hand its leadership over first, hiding the election the window measures), removed from the cluster
(MemberRemove), its data dir wiped, added back as a learner on the same peer URL (MemberAdd, a new member ID), started
with ``--initial-cluster-state existing`` on its old name and client URL (the load's endpoints stay valid), caught up
(its applied raft index at the leader's commit index of the moment it was healthy) and promoted (MemberPromote, which
etcd refuses while the learner lags: retried, each refusal counted by etcd's reason). The step records each phase's
time from the kill, the old and new member IDs, and the member list etcd reports after.

The Cluster API calls go to the other members on the master's own connections; an election or a leader not yet known
makes etcd refuse them for a moment (``no leader``, ``leader changed``, timeouts): they are retried for a while and
counted like the promotion's refusals. Any other refusal fails the window with etcd's reason. When the run stops
half-way, the member is brought back (started on its data dir, or added and started again) before the local etcd's end.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time
from collections.abc import Callable

import gevent
import grpc

from etcd_users.disruptions.actions import ActionError, Done, leader_of, resolve
from etcd_users.disruptions.member_steps import START_TIMEOUT_S, Refused, said_times, start_on
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.settings.disruption_schedule import Disruption
from etcd_users.transport import learners
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool, MemberStatus

logger = logging.getLogger(__name__)

RECONFIGURE_TIMEOUT_S = 20.0  # an election after the leader's kill, then etcd's reconfiguration
LISTED_TIMEOUT_S = 5.0  # a member that answers the list applies the promotion within this
LISTED_POLL_S = 0.1
RETRY_S = 0.1
# etcd's refusals that pass: an election, a leader not yet known, a learner still behind (ErrLearnerNotReady)
_PASSING = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_NOT_READY = "etcdserver: can only promote a learner member which is in sync with leader"


def _hex(member_id: int | None) -> str:
    return "" if member_id is None else f"{member_id:x}"


async def _on_others(pool: EndpointPool, skip: str, method: str, request):
    """``method`` of etcd's Cluster API on the first member, other than ``skip``'s URL, that answers it."""
    last: grpc.aio.AioRpcError | None = None
    for endpoint, connections in pool.connections.items():
        if endpoint.url == skip or not connections:
            continue
        connection = connections[0]
        call = getattr(learners.ClusterStub(connection.channel), method)
        try:
            return await call(request, timeout=pool.settings.timeout, metadata=connection.metadata)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:  # the member is down: the next one
                raise
            last = error
    if last is None:
        raise ActionError("no other member to call")
    raise last


def _passes(error: grpc.aio.AioRpcError) -> bool:
    return error.code() in _PASSING or error.details() == _NOT_READY


def _until_done(call: Callable, skip: str, method: str, request, refusals: dict[str, int]):
    """``method`` until etcd does it; a passing refusal is counted in ``refusals`` by etcd's reason and retried until
    ``RECONFIGURE_TIMEOUT_S``; any other refusal, or the last, is an ``ActionError`` with etcd's reason."""
    deadline = time.monotonic() + RECONFIGURE_TIMEOUT_S
    while True:
        try:
            return call(lambda pool: _on_others(pool, skip, method, request))
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            label = error_label(error)
            if isinstance(error, grpc.aio.AioRpcError) and not _passes(error):
                raise ActionError(f"{method}: {label}") from None
            key = f"{method}: {label}"
            refusals[key] = refusals.get(key, 0) + 1
            if time.monotonic() >= deadline:
                raise ActionError(f"{method}: {label} ({refusals[key]} times in {RECONFIGURE_TIMEOUT_S:g} s)") from None
        gevent.sleep(RETRY_S)


def _members_once_voting(call: Callable, new_id: int):
    """The members as etcd lists them once the promoted one is a voter there: a member answers MemberList from what it
    applied (etcd 3.4 has no linearizable list), which may be before the promotion; the last list after
    ``LISTED_TIMEOUT_S``."""
    deadline = time.monotonic() + LISTED_TIMEOUT_S
    request = learners.MemberListRequest(linearizable=True)
    while True:
        members = call(lambda pool: _on_others(pool, "", "MemberList", request)).members
        if any(member.ID == new_id and not member.isLearner for member in members) or time.monotonic() > deadline:
            return members
        gevent.sleep(LISTED_POLL_S)


def _listed(members) -> list[dict]:
    return [
        {
            "id": _hex(member.ID),
            "name": member.name,
            "peer_urls": list(member.peerURLs),
            "client_urls": list(member.clientURLs),
            "learner": member.isLearner,
        }
        for member in members
    ]


def _initial_cluster(members, name: str, new_id: int) -> str:
    """etcd's --initial-cluster for the member added: the members as etcd lists them, itself (nameless until it
    starts) by ``name``."""
    return ",".join(
        f"{name if member.ID == new_id else member.name}={url}" for member in members for url in member.peerURLs
    )


def _bring_back(cluster: LocalCluster, index: int, call: Callable, step: dict, refusals: dict[str, int]) -> None:
    """The replacement stopped half-way (the run stops, or etcd refused): the member serves again before the local
    etcd's end, started on its data dir while it is still a member, else added again, started and promoted (best
    effort: the run may be ending)."""
    url = cluster.endpoints[index]
    try:
        if cluster.pids[index] is None and "removed_at" not in step:
            cluster.start_member(index, START_TIMEOUT_S)
            return
        if cluster.pids[index] is None:
            cluster.wipe_member(index)
            if "new_id" not in step:
                request = learners.MemberAddRequest(peerURLs=[cluster.peer_url(index)], isLearner=True)
                step["new_id"] = _hex(_until_done(call, url, "MemberAdd", request, refusals).member.ID)
                step["added_at"] = round(time.time(), 3)
            members = call(lambda pool: _on_others(pool, url, "MemberList", learners.MemberListRequest())).members
            initial = _initial_cluster(members, cluster.member_name(index), int(step["new_id"], 16))
            cluster.start_member(index, START_TIMEOUT_S, initial_cluster=initial)
        if "new_id" in step and "promoted_at" not in step:  # a learner left behind fails the audit's HashKV
            new_id = int(step["new_id"], 16)
            # a promote interrupted while it waited for etcd's answer may have been done: etcd refuses a second one
            listed = call(
                lambda pool: _on_others(pool, url, "MemberList", learners.MemberListRequest(linearizable=True))
            )
            if not any(member.ID == new_id and not member.isLearner for member in listed.members):
                _until_done(call, url, "MemberPromote", learners.MemberPromoteRequest(ID=new_id), refusals)
            step["promoted_at"] = round(time.time(), 3)
    except (ActionError, ClusterError, grpc.aio.AioRpcError, TimeoutError) as error:
        logger.warning("disruption: %s was not brought back after its replacement stopped: %s", url, error)


def _said(step: dict) -> str:
    refused = ", ".join(f"{reason} ×{count}" for reason, count in step["refusals"].items())
    leader = f" (the leader; {step['new_leader']} elected)" if "new_leader" in step else ""
    return (
        f"{step['member']}{leader} member {step['old_id']} replaced by {step.get('new_id', '?')} "
        f"({said_times(step, _TIMES)} after the kill{'; refused: ' + refused if refused else ''})"
    )


_TIMES = ("elected_at", "removed_at", "wiped_at", "added_at", "start_at", "healthy_at", "caught_up_at", "promoted_at")


def replace(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """Replace the member named (a follower by default, the leader, or a client URL) by a new member on its URLs."""
    status = resolve(disruption.member, statuses)[0]
    url, index = status.endpoint.url, cluster.endpoints.index(status.endpoint.url)
    try:
        was_leader = leader_of(statuses).member_id == status.member_id
    except ActionError:
        was_leader = False
    refusals: dict[str, int] = {}
    step = {"member": url, "old_id": _hex(status.member_id), "was_leader": was_leader, "refusals": refusals}
    done.steps.append(step)
    done.members.append(url)
    done.start()
    step["stop_at"] = round(time.time(), 3)
    cluster.kill_member(index)
    interrupted = False
    try:
        _replace(cluster, index, status, call, step, refusals)
    except Refused as refused:
        raise ActionError(str(refused)) from None
    except gevent.GreenletExit:
        interrupted = True
        raise
    finally:
        if interrupted or cluster.pids[index] is None:
            _bring_back(cluster, index, call, step, refusals)
        done.result = f"replace: {_said(step)}{_members_after(step)}"


def _members_after(step: dict) -> str:
    listed = [
        f"{m['id']}{' (learner)' if m['learner'] else ''} {','.join(m['client_urls'])}"
        for m in step.get("members_after", ())
    ]
    return f"; members after: {', '.join(listed)}" if listed else ""


def _replace(cluster: LocalCluster, index: int, status: MemberStatus, call, step: dict, refusals: dict) -> None:
    url, peer = status.endpoint.url, cluster.peer_url(index)
    if step["was_leader"]:  # a reconfiguration proposed during the election waits for its end: time it apart
        leader = cluster.leader_index(timeout=RECONFIGURE_TIMEOUT_S)
        step["elected_at"], step["new_leader"] = round(time.time(), 3), cluster.endpoints[leader]
    _until_done(call, url, "MemberRemove", learners.MemberRemoveRequest(ID=status.member_id), refusals)
    step["removed_at"] = round(time.time(), 3)
    cluster.wipe_member(index)
    step["wiped_at"] = round(time.time(), 3)
    added = _until_done(call, url, "MemberAdd", learners.MemberAddRequest(peerURLs=[peer], isLearner=True), refusals)
    new_id = added.member.ID
    step["new_id"], step["added_at"] = _hex(new_id), round(time.time(), 3)
    initial = _initial_cluster(added.members, cluster.member_name(index), new_id)
    start_on(cluster, index, None, step, initial_cluster=initial)
    _until_done(call, url, "MemberPromote", learners.MemberPromoteRequest(ID=new_id), refusals)
    step["promoted_at"] = round(time.time(), 3)
    step["members_after"] = _listed(_members_once_voting(call, new_id))
