"""A process's keys read back at one revision, in pages sorted by key (keys only), on the transport's loop thread.

The first read is linearizable and fixes the revision: every write acknowledged before it is at or below it; the pages
come from the same member at that revision. Any member that answers will do: one that fails (killed or restarting,
frozen, cut off from its leader, behind the revision with etcd's "future revision", or losing its leader as a
partition heals) is left for the next member, and after every member failed once they are all asked again, until one
reads every key or the wait (``--etcd-audit-wait``) has passed. A compaction past the revision while the pages are read
starts the reading again at a newer one. Only etcd's refusal of the user is final: no member would answer otherwise.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit_trail.ledger import Ledger
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool

PAGE_KEYS = 5000
COMPACTED = "mvcc: required revision has been compacted"
COMPACTED_ATTEMPTS = 3
REFUSED = "etcdserver: permission denied"
DEFAULT_WAIT_S = 30.0  # --etcd-audit-wait's default
ROUND_PAUSE_S = 0.2  # after every member failed once, before they are asked again


async def read_back(
    pool: EndpointPool, ledger: Ledger, first: bytes, end: bytes, wait_s: float = DEFAULT_WAIT_S
) -> tuple[int, dict[int, int]]:
    """(revision, counter -> mod_revision of each key of [first, end) present at it), from the first member that
    reads them all; the last member's error when none did within ``wait_s``."""
    loop = asyncio.get_running_loop()
    gives_up = loop.time() + wait_s
    members = _members_in_order(pool)
    turn, compactions = 0, 0
    while True:
        connection = members[turn % len(members)]
        try:
            return await _read_at_one_revision(connection, pool.settings.timeout, ledger, first, end)
        except grpc.aio.AioRpcError as error:
            label = error_label(error)
            if label == COMPACTED and compactions < COMPACTED_ATTEMPTS - 1:
                compactions += 1  # the same member, at a newer revision
                continue
            if label == REFUSED or loop.time() >= gives_up:
                raise
            turn += 1
            if turn % len(members) == 0:
                await asyncio.sleep(ROUND_PAUSE_S)


def _members_in_order(pool: EndpointPool) -> list:
    """One connection to each member the pool knows: the leader first, those left out as dead last (may be back)."""
    endpoints = sorted(pool.endpoints, key=lambda e: (e != pool.leader, e in pool.dead))
    return [pool.connections[endpoint][0] for endpoint in endpoints if pool.connections.get(endpoint)]


async def _read_at_one_revision(
    connection, timeout: float, ledger: Ledger, first: bytes, end: bytes
) -> tuple[int, dict[int, int]]:
    head = await connection.kv.Range(
        rpc_pb2.RangeRequest(key=first, range_end=end, count_only=True), timeout=timeout, metadata=connection.metadata
    )
    revision = head.header.revision
    found: dict[int, int] = {}
    key = first
    index = ledger.index
    while True:
        page = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=key, range_end=end, revision=revision, limit=PAGE_KEYS, keys_only=True),
            timeout=timeout,
            metadata=connection.metadata,
        )
        for kv in page.kvs:
            counter = index(kv.key)
            if counter >= 0:
                found[counter] = kv.mod_revision
        if not page.more or not page.kvs:
            return revision, found
        key = page.kvs[-1].key + b"\0"
