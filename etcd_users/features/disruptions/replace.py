"""replace: a member of the local etcd replaced after a disk failure, as etcd's robustness tests do (MemberReplace).

The member's process is killed (SIGKILL: a failed disk gives etcd no graceful stop, and a leader stopped by SIGTERM
would hand its leadership over first, hiding the election the window measures), removed from the cluster
(MemberRemove), its data dir wiped, added back as a learner on the same peer URL (MemberAdd, a new member ID), started
with ``--initial-cluster-state existing`` on its old name and client URL (the load's endpoints stay valid), caught up
(its applied raft index at the leader's commit index of the moment it was healthy) and promoted (MemberPromote, which
etcd refuses while the learner lags: retried, each refusal counted by etcd's reason). The step records each phase's
time from the kill, the old and new member IDs, and the member list etcd reports after.

The Cluster API calls go to the other members (``cluster_api``: passing refusals retried and counted, any other one
fails the window with etcd's reason). When the run stops half-way, the member is brought back (started on its data
dir, or added and started again) before the local etcd's end.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time
from collections.abc import Callable

import gevent
import grpc

from etcd_users.features.disruptions.actions import ActionError, Done, leader_of, resolve
from etcd_users.features.disruptions.cluster_api import (
    RECONFIGURE_TIMEOUT_S,
    hex_id,
    initial_cluster,
    listed,
    member_list,
    members_after,
    members_once,
    refused_text,
    until_done,
)
from etcd_users.features.disruptions.member_steps import START_TIMEOUT_S, Refused, said_times, start_on
from etcd_users.features.disruptions.schedule import Disruption
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.transport import learners
from etcd_users.transport.pool import MemberStatus

logger = logging.getLogger("etcd_users.disruptions.replace")  # the name users' log filters know


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
                step["new_id"] = hex_id(until_done(call, url, "MemberAdd", request, refusals).member.ID)
                step["added_at"] = round(time.time(), 3)
            members = member_list(call, url)
            initial = initial_cluster(members, cluster.member_name(index), int(step["new_id"], 16))
            cluster.start_member(index, START_TIMEOUT_S, initial_cluster=initial)
        if "new_id" in step and "promoted_at" not in step:  # a learner left behind fails the audit's HashKV
            new_id = int(step["new_id"], 16)
            # a promote interrupted while it waited for etcd's answer may have been done: etcd refuses a second one
            if not _voting(member_list(call, url), new_id):
                until_done(call, url, "MemberPromote", learners.MemberPromoteRequest(ID=new_id), refusals)
            step["promoted_at"] = round(time.time(), 3)
    except (ActionError, ClusterError, grpc.aio.AioRpcError, TimeoutError) as error:
        logger.warning("disruption: %s was not brought back after its replacement stopped: %s", url, error)


def _said(step: dict) -> str:
    leader = f" (the leader; {step['new_leader']} elected)" if "new_leader" in step else ""
    return (
        f"{step['member']}{leader} member {step['old_id']} replaced by {step.get('new_id', '?')} "
        f"({said_times(step, _TIMES)} after the kill{refused_text(step)})"
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
    step = {"member": url, "old_id": hex_id(status.member_id), "was_leader": was_leader, "refusals": refusals}
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
        done.result = f"replace: {_said(step)}{members_after(step)}"


def _replace(cluster: LocalCluster, index: int, status: MemberStatus, call, step: dict, refusals: dict) -> None:
    url, peer = status.endpoint.url, cluster.peer_url(index)
    if step["was_leader"]:  # a reconfiguration proposed during the election waits for its end: time it apart
        leader = cluster.leader_index(timeout=RECONFIGURE_TIMEOUT_S)
        step["elected_at"], step["new_leader"] = round(time.time(), 3), cluster.endpoints[leader]
    until_done(call, url, "MemberRemove", learners.MemberRemoveRequest(ID=status.member_id), refusals)
    step["removed_at"] = round(time.time(), 3)
    cluster.wipe_member(index)
    step["wiped_at"] = round(time.time(), 3)
    added = until_done(call, url, "MemberAdd", learners.MemberAddRequest(peerURLs=[peer], isLearner=True), refusals)
    new_id = added.member.ID
    step["new_id"], step["added_at"] = hex_id(new_id), round(time.time(), 3)
    initial = initial_cluster(added.members, cluster.member_name(index), new_id)
    start_on(cluster, index, None, step, initial_cluster=initial)
    until_done(call, url, "MemberPromote", learners.MemberPromoteRequest(ID=new_id), refusals)
    step["promoted_at"] = round(time.time(), 3)
    step["members_after"] = listed(members_once(call, lambda members: _voting(members, new_id)))


def _voting(members, member_id: int) -> bool:
    return any(member.ID == member_id and not member.isLearner for member in members)
