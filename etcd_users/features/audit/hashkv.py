"""Every member's HashKV at one revision: the lowest current revision among the members, which all have applied.

The load has stopped when this runs, so the audit first waits (``--etcd-audit-wait``, with a line while it waits) for
every member to answer and to reach the cluster's raft index: a member killed as the run ended gets the time to start
again and catch up. Then a member at another revision than the others at the same raft applied index has diverged (etcd
3.5.0–3.5.2 can skip an applied entry on a member killed under load), and one still behind says so; one still silent
is named, and the verdict fails the audit for it. HashKV hashes a member's keys from its
compact revision up to the revision asked; hashes compare only between members with the same compact revision, and a
compacted revision cannot be hashed, so a compaction in between (or members that applied it at different times) means
asking again at a newer revision.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
from dataclasses import replace

import grpc
from etcd3.etcdrpc import rpc_pb2
from google.protobuf.unknown_fields import UnknownFieldSet

from etcd_users.features.audit.verdict import Hashes, MemberHash
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool

logger = logging.getLogger("etcd_users.audit.hashkv")  # the name users' log filters know

ATTEMPTS = 3
RETRY_SECONDS = 0.5
DEFAULT_WAIT_S = 30.0  # --etcd-audit-wait's default
WAIT_POLL_S = 0.2
WAIT_LINE_S = 10.0  # while it waits, a line this often
STATUS_TIMEOUT = 5.0  # a frozen member answers nothing: each look at it waits this long at most
MIN_STATUS_TIMEOUT = 0.5
# StatusResponse.raftAppliedIndex (etcd 3.4+), which the stubs predate: read from the message's unknown fields
RAFT_APPLIED_INDEX_FIELD = 7


async def hash_members(pool: EndpointPool, wait_s: float = DEFAULT_WAIT_S) -> Hashes:
    """Each member's HashKV at the lowest current revision among them, once they all answer at the cluster's raft
    index (or ``wait_s`` ran out), asked again while they cannot be compared."""
    waited = await wait_for_members(pool, wait_s)
    hashes: Hashes | None = None
    for attempt in range(ATTEMPTS):
        if attempt:
            await asyncio.sleep(RETRY_SECONDS)
        hashes = better(await _hash_once(pool), hashes)
        if hashes.comparable:
            break
    return replace(hashes, waited=waited)


def better(latest: Hashes, best: Hashes | None) -> Hashes:
    """Of two attempts, the one that compares more members, the latest on a tie. With a member down no attempt is
    comparable, and the last one may be the one whose two others answered either side of a compaction."""
    if best is None or len(latest.compared) >= len(best.compared):
        return latest
    return best


def _members(pool: EndpointPool) -> list:
    return [(endpoint, pool.connections[endpoint][0]) for endpoint in pool.endpoints if pool.connections.get(endpoint)]


async def _statuses(pool: EndpointPool, members: list, timeout: float = STATUS_TIMEOUT) -> list:
    timeout = max(MIN_STATUS_TIMEOUT, min(pool.settings.timeout, STATUS_TIMEOUT, timeout))
    return await asyncio.gather(
        *(c.maintenance.Status(rpc_pb2.StatusRequest(), timeout=timeout, metadata=c.metadata) for _, c in members),
        return_exceptions=True,
    )


async def wait_for_members(pool: EndpointPool, wait_s: float) -> float:
    """Until every member answers with its raft applied index at the cluster's raft index (the highest index a member
    had committed or applied when the audit first asked: writes of other clients during the wait do not move it), or
    ``wait_s`` pass: the seconds waited. It says when it begins to wait, every ``WAIT_LINE_S`` while it does, and how
    it ended."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline, said, index = started + wait_s, None, 0
    members = _members(pool)
    while True:
        statuses = await _statuses(pool, members, deadline - loop.time())
        index = index or cluster_index(statuses)
        waiting_for = lagging(members, statuses, index)
        now = loop.time()
        if not waiting_for:
            if said is not None:
                logger.info(
                    "audit: every member answers at raft index %d, %.1f s after the audit began", index, now - started
                )
            return now - started
        if now >= deadline:
            logger.warning(
                "audit: after %g s not every member answers at the cluster's raft index %d: %s",
                wait_s,
                index,
                "; ".join(waiting_for),
            )
            return now - started
        if said is None or now - said >= WAIT_LINE_S:
            logger.info(
                "audit: waiting up to %g s for every member to answer at the cluster's raft index %d: %s",
                wait_s,
                index,
                "; ".join(waiting_for),
            )
            said = now
        await asyncio.sleep(WAIT_POLL_S)


def cluster_index(statuses: list) -> int:
    """The highest raft index the members that answered have committed or applied; 0 when none answered."""
    answered = [status for status in statuses if not isinstance(status, BaseException)]
    return max((max(status.raftIndex, applied_index(status)) for status in answered), default=0)


def lagging(members: list, statuses: list, index: int) -> list[str]:
    """The members not yet at raft ``index``, a phrase each: ``127.0.0.1:2379 UNAVAILABLE``, ``127.0.0.1:2379 applied
    1,204 of 1,260``."""
    phrases = []
    for (endpoint, _), status in zip(members, statuses, strict=True):
        if isinstance(status, BaseException):
            phrases.append(f"{endpoint.target} {error_label(status)}")
        elif 0 < applied_index(status) < index:  # 0: a member that does not say (before 3.4) is not waited for
            phrases.append(f"{endpoint.target} applied {applied_index(status):,} of {index:,}")
    return phrases


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
