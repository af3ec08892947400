"""upgrade and rollback: members of the local etcd restarted on their data dirs on another etcd binary, one at a time.

An upgrade restarts a member on ``--etcd-upgrade-binary``, a rollback on the etcd the cluster started with. Each
member's step is SIGTERM, the process's end, a start on the other binary, healthy (its /health), and caught up (its
applied raft index at the leader's commit index of the moment it was healthy), before the next member's; ``all`` takes
the followers first and the leader last. The versions come from etcd's /version (the server's and the cluster's)
before and after each step; once every member runs one minor version, the step waits for etcd to raise the cluster
version to it.

A member that the other binary does not start (etcd refuses a downgrade once the cluster version is the new one) is
started again on the binary it ran, healthy and caught up, and the window fails with the reason etcd logged. When the
run stops half-way, a member still down is started again before the local etcd's end.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import os
import time

import gevent

from etcd_users.features.disruptions.actions import ActionError, Done, leader_of, resolve
from etcd_users.features.disruptions.member_steps import POLL_S, START_TIMEOUT_S, Refused, said_times, start_on
from etcd_users.features.disruptions.schedule import Disruption
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.target.action_table import ALL, FOLLOWER
from etcd_users.transport.pool import MemberStatus

logger = logging.getLogger("etcd_users.disruptions.upgrade")  # the name users' log filters know

# etcd's leader checks the members' versions every few seconds (4 s in 3.5) before it raises the cluster version
CLUSTER_VERSION_TIMEOUT_S = 15.0


def _same(one: str, other: str) -> bool:
    return os.path.realpath(one) == os.path.realpath(other)


def _minor(version: str | None) -> str:
    return ".".join((version or "").split(".")[:2])


def _members(cluster: LocalCluster, statuses: list[MemberStatus], member: str, binary: str) -> list[int]:
    """The indexes of the members to restart on ``binary``: ``all``, those that do not run it yet, the followers first
    and the leader last; ``follower``, the first follower that does not run it yet; the leader or a URL, that member,
    which must not run it already."""
    binaries = cluster.binaries
    if member == FOLLOWER:  # a follower that does not run it yet
        leader = leader_of(statuses)
        followers = [s for s in statuses if s.error is None and s.member_id != leader.member_id]
        indexes = [cluster.endpoints.index(s.endpoint.url) for s in followers]
        indexes = [index for index in indexes if not _same(binaries[index], binary)]
        if not indexes:
            raise ActionError(f"no follower that answers runs another etcd than {binary}")
        return indexes[:1]
    if member != ALL:
        url = resolve(member, statuses)[0].endpoint.url
        index = cluster.endpoints.index(url)
        if _same(binaries[index], binary):
            raise ActionError(f"{url} runs {binary} already")
        return [index]
    indexes = [index for index, each in enumerate(binaries) if not _same(each, binary)]
    if not indexes:
        raise ActionError(f"every member runs {binary} already")
    try:
        leader = cluster.endpoints.index(leader_of(statuses).endpoint.url)
    except ActionError:  # no leader agreed on: the members in their order
        return indexes
    return sorted(indexes, key=lambda index: index == leader)


def _cluster_version(cluster: LocalCluster, step: dict) -> None:
    """The cluster version after the step, as etcd tells it; once every member runs one minor version, after etcd has
    raised the cluster version to it (or ``CLUSTER_VERSION_TIMEOUT_S`` passed)."""
    deadline = time.monotonic() + CLUSTER_VERSION_TIMEOUT_S
    while True:
        answers = [cluster.versions(index) for index in range(len(cluster.endpoints))]
        known = [answer for answer in answers if answer is not None]
        servers = {_minor(server) for server, _ in known}
        version = known[0][1] if known else None
        settled = len(servers) == 1 and len(known) == len(answers) and _minor(version) == next(iter(servers))
        if settled or len(servers) > 1 or time.monotonic() >= deadline:
            step["cluster_version_after"] = version
            step["cluster_version_at"] = round(time.time(), 3)
            return
        gevent.sleep(POLL_S * 4)


def _restart_on(cluster: LocalCluster, index: int, binary: str, done: Done) -> None:
    """One member's step: stopped, started on ``binary``, healthy and caught up; back on the binary it ran when
    ``binary`` does not start (``Refused`` after that)."""
    url = cluster.endpoints[index]
    previous = cluster.binaries[index]
    server, cluster_version = cluster.versions(index) or (None, None)
    step = {"member": url, "to_binary": binary, "version_before": server, "cluster_version_before": cluster_version}
    done.steps.append(step)
    done.members.append(url)
    done.start()
    step["stop_at"] = round(time.time(), 3)
    cluster.stop_member(index)
    try:
        start_on(cluster, index, binary, step)
    except Refused as refused:
        step["refused"] = str(refused)
        logger.warning(
            "disruption: %s did not start on %s (%s); starting it again on %s", url, binary, refused, previous
        )
        start_on(cluster, index, previous, step, prefix="restart_")
        _after(cluster, index, step)
        raise
    finally:
        if cluster.pids[index] is None:  # the run stops half-way: back on one binary or the other
            _bring_back(cluster, index, (cluster.binaries[index], previous))
    _after(cluster, index, step)


def _after(cluster: LocalCluster, index: int, step: dict) -> None:
    answer = cluster.versions(index)
    step["version_after"], step["binary_after"] = (answer[0] if answer else None), cluster.binaries[index]
    _cluster_version(cluster, step)


def _bring_back(cluster: LocalCluster, index: int, binaries: tuple[str, str]) -> None:
    for binary in binaries:
        try:
            cluster.start_member(index, START_TIMEOUT_S, binary=binary)
            return
        except ClusterError as error:
            logger.warning("disruption: member %d did not start on %s: %s", index, binary, str(error).splitlines()[0])


def _said(step: dict) -> str:
    """A step in a few words: the versions and the times from the stop."""
    versions = f"{step.get('version_before')}→{step.get('version_after')}"
    refused = f", refused: {step['refused']}" if "refused" in step else ""
    return f"{step['member']} {versions} ({said_times(step, _TIMES)} after the stop{refused})"


_TIMES = ("start_at", "healthy_at", "caught_up_at", "restart_start_at", "restart_healthy_at", "restart_caught_up_at")


def _change(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, binary: str):
    kind = disruption.action
    try:
        for index in _members(cluster, statuses, disruption.member, binary):
            _restart_on(cluster, index, binary, done)
    except Refused as refused:
        done.result = f"{kind}: " + "; then ".join(_said(step) for step in done.steps)
        raise ActionError(str(refused)) from None
    first, last = done.steps[0], done.steps[-1]
    cluster_versions = f"cluster version {first['cluster_version_before']}→{last['cluster_version_after']}"
    done.result = f"{kind}: " + "; then ".join(_said(step) for step in done.steps) + f"; {cluster_versions}"


def upgrade(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done) -> None:
    """Restart the members named on ``--etcd-upgrade-binary``, one at a time."""
    if not cluster.upgrade_binary:
        raise ActionError("no --etcd-upgrade-binary: the local etcd has no etcd to upgrade to")
    _change(cluster, statuses, disruption, done, cluster.upgrade_binary)


def rollback(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done) -> None:
    """Restart the members named on the etcd the cluster started with, one at a time."""
    _change(cluster, statuses, disruption, done, cluster.binary)
