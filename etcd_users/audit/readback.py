"""A process's keys read back at one revision, in pages sorted by key (keys only), on the transport's loop thread.

The first read is linearizable and fixes the revision: every write acknowledged before it is at or below it. A
compaction past that revision while the pages are read starts the reading again at a newer one, and so does a member
that has not applied that revision (it answers "future revision"): the next member reads it. A member that does not
answer in time (frozen, or cut off from its leader) and a leader lost under the reading (a partition healing as the run
ends: etcd answers "leader changed") make it read again, from the pool's next connection, until a leader serves it or
UNSERVED_WAIT_S has passed.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit.ledger import Ledger
from etcd_users.transport.errors import LEADER_LOST_LABELS, SLOW_MEMBER_LABELS, error_label
from etcd_users.transport.pool import EndpointPool

PAGE_KEYS = 5000
COMPACTED = "mvcc: required revision has been compacted"
# a member behind the revision the first read fixed (or one that diverged): read again, from the next member
FUTURE = "mvcc: required revision is a future revision"
ATTEMPTS = 3
# no leader serves the read (yet), or the member did not answer: another member, or a new leader, may; the last two
# are etcd's answers when it could not confirm its leader in time
NOT_CONFIRMED_LABELS = frozenset({"etcdserver: request timed out", "context deadline exceeded"})
UNSERVED_LABELS = LEADER_LOST_LABELS | SLOW_MEMBER_LABELS | NOT_CONFIRMED_LABELS
# several election timeouts (1 s by default; --etcd-local-election sets the local members')
UNSERVED_WAIT_S = 10.0
UNSERVED_RETRY_S = 0.2


async def read_back(pool: EndpointPool, ledger: Ledger, first: bytes, end: bytes) -> tuple[int, dict[int, int]]:
    """(revision, counter -> mod_revision of each key of [first, end) present at it)."""
    loop = asyncio.get_running_loop()
    gives_up = loop.time() + UNSERVED_WAIT_S
    attempts = 0
    while True:
        try:
            return await _read_at_one_revision(pool, ledger, first, end)
        except grpc.aio.AioRpcError as error:
            label = error_label(error)
            if label in (COMPACTED, FUTURE) and attempts < ATTEMPTS - 1:
                attempts += 1
            elif label in UNSERVED_LABELS and loop.time() < gives_up:
                await asyncio.sleep(UNSERVED_RETRY_S)
            else:
                raise


async def _read_at_one_revision(
    pool: EndpointPool, ledger: Ledger, first: bytes, end: bytes
) -> tuple[int, dict[int, int]]:
    timeout = pool.settings.timeout
    connection = pool.next_connection()
    head = await connection.kv.Range(
        rpc_pb2.RangeRequest(key=first, range_end=end, count_only=True), timeout=timeout, metadata=connection.metadata
    )
    revision = head.header.revision
    found: dict[int, int] = {}
    key = first
    while True:
        connection = pool.next_connection()
        page = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=key, range_end=end, revision=revision, limit=PAGE_KEYS, keys_only=True),
            timeout=timeout,
            metadata=connection.metadata,
        )
        index = ledger.index
        for kv in page.kvs:
            counter = index(kv.key)
            if counter >= 0:
                found[counter] = kv.mod_revision
        if not page.more or not page.kvs:
            return revision, found
        key = page.kvs[-1].key + b"\0"
