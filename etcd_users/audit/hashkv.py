"""Every member's HashKV at one revision: the lowest current revision among the members, which all have applied.

HashKV hashes a member's keys from its compact revision up to the revision asked; hashes compare only between
members with the same compact revision, and a compacted revision cannot be hashed, so a compaction in between (or
members that applied it at different times) means asking again at a newer revision.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit.verdict import Hashes, MemberHash
from etcd_users.transport.errors import error_detail
from etcd_users.transport.pool import EndpointPool

ATTEMPTS = 3
RETRY_SECONDS = 0.5


async def hash_members(pool: EndpointPool) -> Hashes:
    """Each member's HashKV at the lowest current revision among them, asked again while they cannot be compared."""
    hashes = Hashes(0, ())
    for attempt in range(ATTEMPTS):
        if attempt:
            await asyncio.sleep(RETRY_SECONDS)
        hashes = await _hash_once(pool)
        if hashes.comparable:
            break
    return hashes


async def _hash_once(pool: EndpointPool) -> Hashes:
    timeout = pool.settings.timeout
    members = [
        (endpoint, pool.connections[endpoint][0]) for endpoint in pool.endpoints if pool.connections.get(endpoint)
    ]
    statuses = await asyncio.gather(
        *(c.maintenance.Status(rpc_pb2.StatusRequest(), timeout=timeout, metadata=c.metadata) for _, c in members),
        return_exceptions=True,
    )
    current = [status.header.revision for status in statuses if not isinstance(status, BaseException)]
    if not current:
        error = next((error_detail(s) for s in statuses if isinstance(s, BaseException)), "no member answered")
        return Hashes(0, tuple(MemberHash(e.target, None, 0, error) for e, _ in members))
    revision = min(current)

    async def one(endpoint, connection) -> MemberHash:
        try:
            response = await connection.maintenance.HashKV(
                rpc_pb2.HashKVRequest(revision=revision), timeout=timeout, metadata=connection.metadata
            )
        except grpc.aio.AioRpcError as error:
            return MemberHash(endpoint.target, None, 0, error_detail(error))
        return MemberHash(endpoint.target, response.hash, response.compact_revision)

    return Hashes(revision, tuple(await asyncio.gather(*(one(e, c) for e, c in members))))
