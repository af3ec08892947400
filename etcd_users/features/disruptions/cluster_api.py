"""etcd's Cluster API as the membership actions call it (replace, add-learner, promote, remove): on the master's own
connections, from the disruption's greenlet, on a member other than the one acted on.

An election or a leader not yet known makes etcd refuse a reconfiguration for a moment (``no leader``, ``leader
changed``, ``unhealthy cluster`` while the members have not all been connected for 5 s, timeouts), and a learner still
behind its leader cannot be promoted: those refusals are retried for a while, each counted by etcd's reason. Any other
refusal is an ``ActionError`` with etcd's reason.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time
from collections.abc import Callable

import gevent
import grpc

from etcd_users.features.disruptions.actions import ActionError
from etcd_users.transport import learners
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool

RECONFIGURE_TIMEOUT_S = 20.0  # an election after the leader's kill, then etcd's reconfiguration
LISTED_TIMEOUT_S = 5.0  # a member that answers the list applies a change within this
LISTED_POLL_S = 0.1
RETRY_S = 0.1
# etcd's refusals that pass: an election, a leader not yet known, a learner still behind (ErrLearnerNotReady)
_PASSING = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
NOT_READY = "etcdserver: can only promote a learner member which is in sync with leader"


def hex_id(member_id: int | None) -> str:
    """A member ID as etcd and etcdctl write it."""
    return "" if member_id is None else f"{member_id:x}"


async def on_others(pool: EndpointPool, skip: str, method: str, request):
    """``method`` of etcd's Cluster API on the first member, other than ``skip``'s URL, that answers it."""
    last: grpc.aio.AioRpcError | None = None
    for endpoint, connections in pool.connections.items():
        if endpoint.url == skip or not connections or endpoint not in pool.endpoints:
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


def passes(error: grpc.aio.AioRpcError) -> bool:
    return error.code() in _PASSING or error.details() == NOT_READY


def until_done(call: Callable, skip: str, method: str, request, refusals: dict[str, int]):
    """``method`` until etcd does it; a passing refusal is counted in ``refusals`` by etcd's reason and retried until
    ``RECONFIGURE_TIMEOUT_S``; any other refusal, or the last, is an ``ActionError`` with etcd's reason. ``call``: the
    master's connections (``Probe.run``)."""
    deadline = time.monotonic() + RECONFIGURE_TIMEOUT_S
    while True:
        try:
            return call(lambda pool: on_others(pool, skip, method, request))
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            label = error_label(error)
            if isinstance(error, grpc.aio.AioRpcError) and not passes(error):
                raise ActionError(f"{method}: {label}") from None
            key = f"{method}: {label}"
            refusals[key] = refusals.get(key, 0) + 1
            if time.monotonic() >= deadline:
                raise ActionError(f"{method}: {label} ({refusals[key]} times in {RECONFIGURE_TIMEOUT_S:g} s)") from None
        gevent.sleep(RETRY_S)


def member_list(call: Callable, skip: str = ""):
    """The members, from a member other than ``skip``'s URL: linearizable where etcd has it (3.5; 3.4 ignores the
    field and answers from what it applied)."""
    request = learners.MemberListRequest(linearizable=True)
    return call(lambda pool: on_others(pool, skip, "MemberList", request)).members


def members_once(call: Callable, settled: Callable[[list], bool]) -> list:
    """The members once ``settled(members)`` holds: a member answers MemberList from what it applied, which may be
    before the change; the last list after ``LISTED_TIMEOUT_S``."""
    deadline = time.monotonic() + LISTED_TIMEOUT_S
    while True:
        members = member_list(call)
        if settled(members) or time.monotonic() > deadline:
            return members
        gevent.sleep(LISTED_POLL_S)


def listed(members) -> list[dict]:
    """The members as a window's step records them."""
    return [
        {
            "id": hex_id(member.ID),
            "name": member.name,
            "peer_urls": list(member.peerURLs),
            "client_urls": list(member.clientURLs),
            "learner": member.isLearner,
        }
        for member in members
    ]


def refused_text(step: dict) -> str:
    """``; refused: REASON ×N, …`` from a step's ``refusals``; '' without any."""
    refused = ", ".join(f"{reason} ×{count}" for reason, count in step["refusals"].items())
    return f"; refused: {refused}" if refused else ""


def members_after(step: dict) -> str:
    """``; members after: ID URL, ID (learner) URL`` from a step's ``members_after``; '' without it."""
    shown = [
        f"{m['id']}{' (learner)' if m['learner'] else ''} {','.join(m['client_urls'])}"
        for m in step.get("members_after", ())
    ]
    return f"; members after: {', '.join(shown)}" if shown else ""


def initial_cluster(members, name: str, new_id: int) -> str:
    """etcd's --initial-cluster for the member added: the members as etcd lists them, itself (nameless until it
    starts) by ``name``."""
    return ",".join(
        f"{name if member.ID == new_id else member.name}={url}" for member in members for url in member.peerURLs
    )
