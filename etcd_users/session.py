"""A process's session: its settings, key space, bridge and connection pool, opened by its first user.

Each process that runs users opens its own on first use, after Locust has forked (``--processes``), and keeps it on
its run's context (``etcd_users.run_context``); a new run with other options (the web UI's form, the master's) opens
a new one.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
import time

import gevent.lock
from etcd3.etcdrpc import rpc_pb2

from etcd_users.keys import KeySpace
from etcd_users.settings import EtcdSettings
from etcd_users.transport import bridge
from etcd_users.transport.pool import EndpointPool

logger = logging.getLogger(__name__)

_POPULATE_CONCURRENCY = 64


class Session:
    """Settings, transport and connections of one process for one run."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings)
        distribution = settings.distribution
        if distribution.kind not in ("uniform", "sequential"):
            # what the run's skew should be, to compare with the members' keys afterwards
            logger.info(
                "keys drawn %s: %.1f%% of the requests to the hottest 1%% of the %d keys, in theory",
                distribution,
                100.0 * distribution.hottest_share(self.keys.size),
                self.keys.size,
            )
        self.bridge = bridge.bridge()
        self.pool = EndpointPool(settings)
        self.bridge.run(self.pool.open)
        self._populated = False
        self._populate_lock = gevent.lock.Semaphore()

    def ensure_key_space(self) -> None:
        """Write the key space once before reads measure it; not reported as requests."""
        if self._populated:
            return
        with self._populate_lock:
            if not self._populated:
                started = time.monotonic()
                written = self.bridge.run(self._populate)
                if written:
                    logger.info(
                        "wrote %d keys of the read key space under %r in %.1fs",
                        written,
                        self.keys.prefix.decode(errors="replace"),
                        time.monotonic() - started,
                    )
                self._populated = True

    async def _populate(self) -> int:
        first, end = self.keys.first_and_end()
        connection = self.pool.next_connection()
        count = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=first, range_end=end, count_only=True),
            timeout=self.settings.timeout,
            metadata=connection.metadata,
        )
        if count.count >= self.keys.size:
            return 0
        limit = asyncio.Semaphore(_POPULATE_CONCURRENCY)

        async def put(key: bytes) -> None:
            async with limit:
                connection = self.pool.next_connection()
                request = rpc_pb2.PutRequest(key=key, value=self.keys.value)
                await connection.kv.Put(request, timeout=self.settings.timeout, metadata=connection.metadata)

        await asyncio.gather(*(put(key) for key in self.keys.all_keys()))
        return self.keys.size

    def close(self) -> None:
        self.bridge.run(self.pool.close)
