"""Every member's HashKV at one revision: the lowest current revision among the members, which all have applied.

The load has stopped when this runs, so the members first get a bounded time to apply the same raft entries: then a
member at another revision than the others at the same raft applied index has diverged (etcd 3.5.0–3.5.2 can skip an
applied entry on a member killed under load), and one still behind says so. HashKV hashes a member's keys from its
compact revision up to the revision asked; hashes compare only between members with the same compact revision, and a
compacted revision cannot be hashed, so a compaction in between (or members that applied it at different times) means
asking again at a newer revision.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import time

import grpc
from etcd3.etcdrpc import rpc_pb2
from google.protobuf.unknown_fields import UnknownFieldSet

from etcd_users.audit.verdict import Hashes, MemberHash
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool

ATTEMPTS = 3
RETRY_SECONDS = 0.5
SETTLE_SECONDS = 10.0  # for the members to apply the same raft entries once the load stopped
SETTLE_POLL_SECONDS = 0.2
STATUS_TIMEOUT = 5.0  # a frozen member answers nothing: each look at it waits this long at most
# StatusResponse.raftAppliedIndex (etcd 3.4+), which the stubs predate: read from the message's unknown fields
RAFT_APPLIED_INDEX_FIELD = 7


async def hash_members(pool: EndpointPool) -> Hashes:
    """Each member's HashKV at the lowest current revision among them, once they applied the same raft entries (or
    the time to settle ran out), asked again while they cannot be compared."""
    await _settle(pool)
    hashes = Hashes(0, ())
    for attempt in range(ATTEMPTS):
        if attempt:
            await asyncio.sleep(RETRY_SECONDS)
        hashes = await _hash_once(pool)
        if hashes.comparable:
            break
    return hashes


def _members(pool: EndpointPool) -> list:
    return [(endpoint, pool.connections[endpoint][0]) for endpoint in pool.endpoints if pool.connections.get(endpoint)]


async def _statuses(pool: EndpointPool, members: list) -> list:
    timeout = min(pool.settings.timeout, STATUS_TIMEOUT)
    return await asyncio.gather(
        *(c.maintenance.Status(rpc_pb2.StatusRequest(), timeout=timeout, metadata=c.metadata) for _, c in members),
        return_exceptions=True,
    )


async def _settle(pool: EndpointPool) -> None:
    """Until every member answers at the same raft applied index, or ``SETTLE_SECONDS`` pass."""
    deadline = time.monotonic() + SETTLE_SECONDS
    members = _members(pool)
    while time.monotonic() < deadline:
        statuses = await _statuses(pool, members)
        if all(not isinstance(status, BaseException) for status in statuses):
            if len({applied_index(status) for status in statuses}) <= 1:
                return
        await asyncio.sleep(SETTLE_POLL_SECONDS)


def applied_index(status: rpc_pb2.StatusResponse) -> int:
    """The member's raft applied index; 0 from a member that does not send it."""
    for field in UnknownFieldSet(status):
        if field.field_number == RAFT_APPLIED_INDEX_FIELD and isinstance(field.data, int):
            return field.data
    return 0


async def _hash_once(pool: EndpointPool) -> Hashes:
    members = _members(pool)
    statuses = await _statuses(pool, members)
    current = {status.header.revision for status in statuses if not isinstance(status, BaseException)}
    if not current:
        error = next((error_label(s) for s in statuses if isinstance(s, BaseException)), "no member answered")
        return Hashes(0, tuple(MemberHash(e.target, None, 0, error) for e, _ in members))
    if len(current) == 1:
        # the members at one revision (settled): each hashes its current one, which a compaction at that very
        # revision (the local etcd's, as the load stops) leaves hashable, unlike the same revision asked by number
        hashes = await _hash_at(pool, members, statuses, 0)
        if len({member.revision for member in hashes.answered}) <= 1:
            return hashes
    return await _hash_at(pool, members, statuses, min(current))


async def _hash_at(pool: EndpointPool, members: list, statuses: list, revision: int) -> Hashes:
    """Each member's HashKV at ``revision`` (0: its current one)."""
    timeout = pool.settings.timeout

    async def one(endpoint, connection, status) -> MemberHash:
        if isinstance(status, BaseException):
            return MemberHash(endpoint.target, None, 0, error_label(status))
        known = {"revision": status.header.revision, "applied_index": applied_index(status), "version": status.version}
        try:
            response = await connection.maintenance.HashKV(
                rpc_pb2.HashKVRequest(revision=revision), timeout=timeout, metadata=connection.metadata
            )
        except grpc.aio.AioRpcError as error:
            return MemberHash(endpoint.target, None, 0, error_label(error), **known)
        if not revision:
            known["revision"] = response.header.revision  # the revision it hashed
        return MemberHash(endpoint.target, response.hash, response.compact_revision, **known)

    answers = await asyncio.gather(*(one(e, c, s) for (e, c), s in zip(members, statuses, strict=True)))
    answered = [answer.revision for answer in answers if answer.error is None]
    return Hashes(revision or min(answered, default=0), tuple(answers))
