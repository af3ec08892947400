"""Membership changes on the schedule: ``add-learner`` (the local etcd grows by a member, started and added as a
learner), ``promote`` (the cluster's learner made a voting member) and ``remove`` (a member removed from the cluster),
each timed from its request, through etcd's Cluster API (``cluster_api``: passing refusals retried and counted).

``promote`` and ``remove`` act on any cluster (one the tool did not start with ``--etcd-disrupt-allowed``); a member
removed stops by itself (etcd: "the member has been permanently removed from the cluster"). The pool of each process
follows the membership (``transport.membership``): a removed member and a learner get no load, a promoted member the
tool added gets its share.

A learner the run added and never promoted is removed when the run stops (``remove_learners_left``): etcd allows one
learner at a time, and the next run's add-learner would be refused; the log says so, or why it stays.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time
from collections.abc import Callable

import grpc

from etcd_users.features.disruptions.actions import ActionError, Done, leader_of, resolve
from etcd_users.features.disruptions.cluster_api import (
    hex_id,
    initial_cluster,
    listed,
    member_list,
    members_after,
    members_once,
    refused_text,
    until_done,
)
from etcd_users.features.disruptions.member_steps import Refused, said_times, start_on
from etcd_users.features.disruptions.schedule import Disruption
from etcd_users.local import LocalCluster
from etcd_users.transport import learners
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import MemberStatus

MIB = 1024 * 1024
_ADD_TIMES = ("added_at", "start_at", "healthy_at", "caught_up_at")


def add_learner(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """A new member of the local etcd: its place made (ports, data dir, its peer link), MemberAdd as a learner, started
    with ``--initial-cluster-state existing``, healthy, and caught up with the leader's commit index; the bytes it
    received from its peers on the way."""
    refusals: dict[str, int] = {}
    index = cluster.add_member(disruption.value)
    url, peer = cluster.endpoints[index], cluster.peer_url(index)
    step = {"member": url, "peer_url": peer, "refusals": refusals}
    zone = cluster.zone(index)
    if zone is not None:
        step["zone"] = zone
    done.steps.append(step)
    done.members.append(url)
    done.start()
    step["asked_at"] = round(time.time(), 3)
    added = until_done(call, "", "MemberAdd", learners.MemberAddRequest(peerURLs=[peer], isLearner=True), refusals)
    new_id = added.member.ID
    step["new_id"], step["added_at"] = hex_id(new_id), round(time.time(), 3)
    try:
        start_on(
            cluster,
            index,
            None,
            step,
            initial_cluster=initial_cluster(added.members, cluster.member_name(index), new_id),
        )
    except Refused as refused:
        raise ActionError(str(refused)) from None
    received = cluster.peer_received_bytes(index)
    if received is not None:
        step["received_bytes"] = received
    step["members_after"] = listed(members_once(call, lambda members: any(m.ID == new_id for m in members)))
    bytes_said = f"; {received / MIB:.2f} MiB received from its peers" if received is not None else ""
    in_zone = f" in zone {zone}" if zone is not None else ""
    done.result = (
        f"add-learner: {url} member {step['new_id']} added as a learner{in_zone} "
        f"({said_times(step, _ADD_TIMES, 'asked_at')} after the request{bytes_said}{refused_text(step)})"
        f"{members_after(step)}"
    )


def promote(statuses: list[MemberStatus], disruption: Disruption, done: Done, call: Callable) -> None:
    """Every learner of the cluster (etcd allows one by default) promoted; etcd refuses while it lags its leader: each
    refusal counted, retried."""
    waiting = [member for member in member_list(call) if member.isLearner]
    if not waiting:
        raise ActionError("the cluster has no learner to promote; add one first (add-learner@TIME on the local etcd)")
    for member in waiting:
        url = ",".join(member.clientURLs) or member.name or hex_id(member.ID)
        step = {"member": url, "id": hex_id(member.ID), "refusals": {}}
        done.steps.append(step)
        done.members.append(url)
        done.start()
        step["asked_at"] = round(time.time(), 3)
        until_done(call, "", "MemberPromote", learners.MemberPromoteRequest(ID=member.ID), step["refusals"])
        step["promoted_at"] = round(time.time(), 3)
    promoted = {member.ID for member in waiting}
    after = members_once(call, lambda members: not any(m.isLearner and m.ID in promoted for m in members))
    step["members_after"] = listed(after)
    said = ", ".join(
        f"{s['member']} member {s['id']} in {s['promoted_at'] - s['asked_at']:.2f} s{refused_text(s)}"
        for s in done.steps
    )
    done.result = f"promote: {said}{members_after(step)}"


def remove(statuses: list[MemberStatus], disruption: Disruption, done: Done, call: Callable) -> None:
    """The member named removed from the cluster (MemberRemove, sent to another member): it stops by itself."""
    status = resolve(disruption.member, statuses)[0]
    url = status.endpoint.url
    try:
        was_leader = leader_of(statuses).member_id == status.member_id
    except ActionError:
        was_leader = False
    step = {"member": url, "id": hex_id(status.member_id), "was_leader": was_leader, "refusals": {}}
    done.steps.append(step)
    done.members.append(url)
    done.start()
    step["asked_at"] = round(time.time(), 3)
    until_done(call, url, "MemberRemove", learners.MemberRemoveRequest(ID=status.member_id), step["refusals"])
    step["removed_at"] = round(time.time(), 3)
    after = members_once(call, lambda members: all(m.ID != status.member_id for m in members))
    step["members_after"] = listed(after)
    leader = " (the leader)" if was_leader else ""
    done.result = (
        f"remove: {url}{leader} member {step['id']} removed in {step['removed_at'] - step['asked_at']:.2f} s"
        f"{refused_text(step)}{members_after(step)}"
    )


def remove_learners_left(call: Callable, added: list[dict]) -> list[str]:
    """The learners among the members the run added (add-learner's steps) removed from the cluster, one line each,
    or why one stays: etcd allows one learner at a time."""
    ours = {step["peer_url"]: step["member"] for step in added if "peer_url" in step}
    if not ours:
        return []
    try:
        members = member_list(call)
    except (ActionError, grpc.aio.AioRpcError, TimeoutError, EndpointError) as error:
        why = error_label(error) if isinstance(error, (grpc.aio.AioRpcError, TimeoutError)) else str(error)
        return [f"{', '.join(ours.values())} may be left as a learner: etcd refused the member list ({why})"]
    lines = []
    for member in members:
        url = next((ours[peer] for peer in member.peerURLs if peer in ours), None)
        if url is None or not member.isLearner:
            continue
        try:
            until_done(call, url, "MemberRemove", learners.MemberRemoveRequest(ID=member.ID), {})
        except (ActionError, EndpointError) as error:
            lines.append(f"{url} member {hex_id(member.ID)} left as a learner: etcd refused its removal ({error})")
        else:
            lines.append(
                f"{url} member {hex_id(member.ID)} removed from the cluster: a learner never promoted (etcd takes one "
                "learner at a time)"
            )
    return lines
