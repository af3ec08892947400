"""A member of the local etcd started again in the middle of a disruption (an upgrade, a rollback, a replacement):
started, healthy, and caught up with the leader, each moment noted in the window's step; ``Refused`` with the reason
etcd logged when its process ends on the way."""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time

import gevent

from etcd_users.features.disruptions.actions import ActionError
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.local.logs import log_size, start_reason

START_TIMEOUT_S = 30.0  # a member replays its WAL before it is healthy
CATCH_UP_TIMEOUT_S = 30.0
POLL_S = 0.05


class Refused(Exception):
    """The member's process ended before it was caught up: etcd's reason, from its log."""


def caught_up(cluster: LocalCluster, index: int, offset: int) -> None:
    """Wait until member ``index`` has applied the leader's commit index of now; ``Refused`` when it ends first
    (``offset``: where its log stood at its start)."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    leader = cluster.leader_index(timeout=CATCH_UP_TIMEOUT_S)
    indexes = cluster.raft_indexes(leader)
    target = indexes[0] if indexes else 0
    applied = 0
    while True:
        if cluster.pids[index] is None:
            raise Refused(start_reason(cluster.log_path(index), offset))
        indexes = cluster.raft_indexes(index)
        applied = indexes[1] if indexes else applied
        if applied >= target:
            return
        if time.monotonic() >= deadline:
            raise ActionError(
                f"{cluster.endpoints[index]} applied raft index {applied} of the leader's {target} in "
                f"{CATCH_UP_TIMEOUT_S:g} s: not caught up"
            )
        gevent.sleep(POLL_S)


def start_on(
    cluster: LocalCluster,
    index: int,
    binary: str | None,
    step: dict,
    prefix: str = "",
    initial_cluster: str | None = None,
) -> None:
    """Start member ``index`` on ``binary`` (None: the one it ran) and wait until it is healthy and caught up, noting
    when in ``step`` (``prefix``: the keys of a second start); ``initial_cluster``: it joins the cluster as it is
    (``--initial-cluster-state existing``). ``Refused`` with etcd's reason when its process ends on the way."""
    offset = log_size(cluster.log_path(index))
    step[f"{prefix}start_at"] = round(time.time(), 3)
    try:
        cluster.start_member(index, START_TIMEOUT_S, binary=binary, initial_cluster=initial_cluster)
    except ClusterError as error:
        if cluster.pids[index] is not None:  # not healthy in time, still running: no refusal of etcd's
            raise ActionError(str(error).splitlines()[0]) from None
        raise Refused(start_reason(cluster.log_path(index), offset)) from None
    step[f"{prefix}healthy_at"] = round(time.time(), 3)
    caught_up(cluster, index, offset)
    step[f"{prefix}caught_up_at"] = round(time.time(), 3)


def said_times(step: dict, keys: tuple[str, ...], origin: str = "stop_at") -> str:
    """The moments of ``step`` among ``keys``, in seconds from its ``origin`` (its stop): ``start 0.01 s, healthy 0.38
    s``."""
    since = step[origin]
    said = (f"{key.split('_at')[0].replace('_', ' ')} {step[key] - since:.2f} s" for key in keys if key in step)
    return ", ".join(said)
