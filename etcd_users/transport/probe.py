"""The master's own connections during a run: one per endpoint, apart from the users' pool.

The master (or the single process) calls etcd for itself while a run goes on: it compacts the history
(``etcd_users.transport.compaction``) and asks for alarms (``etcd_users.features.monitoring.space``).
``with_probe`` opens and closes a pool around one piece of work; a ``Probe`` keeps its pool open until
``close``, for work repeated every few seconds. Its calls run on the process's bridge, from greenlets of the gevent
thread.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import grpc

from etcd_users.settings import EtcdSettings
from etcd_users.transport import bridge
from etcd_users.transport.access import access_problem
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import EndpointPool


class Probe:
    """A pool of one connection per endpoint (round-robin over the members that answer), opened on first use."""

    def __init__(self, settings: EtcdSettings) -> None:
        # any member answers these calls; a leader-only pool would stop with the leader
        self.settings = replace(settings, conns=1, target="round-robin")
        self._pool: EndpointPool | None = None
        self._bridge: bridge.Bridge | None = None

    def run(self, work: Callable[[EndpointPool], Awaitable[Any]]) -> Any:
        """Await ``work(pool)`` on the loop thread and return its result, raising its error (or the pool's, when no
        endpoint answers: ``EndpointError``)."""
        if self._pool is None:
            self._bridge = bridge.bridge()
            # set first: close() closes a pool whose opening was interrupted
            self._pool = EndpointPool(self.settings, says_membership=False)
            try:
                self._bridge.run(self._pool.open)
            except Exception:
                self.close()
                raise
            except BaseException:  # the greenlet is being killed: close without waiting
                self.close(wait=False)
                raise
        return self._bridge.run(_rediscovering, work, self._pool)

    def close(self, wait: bool = True) -> None:
        """Close the connections (best effort: the run is over or the transport closing)."""
        pool, self._pool = self._pool, None
        if pool is None or self._bridge is None:
            return
        try:
            if wait:
                self._bridge.run(pool.close)
            else:
                self._bridge.post(lambda: asyncio.ensure_future(pool.close()))
        except Exception:  # a closed bridge has closed its channels with its loop
            pass


async def _rediscovering(work: Callable[[EndpointPool], Awaitable[Any]], pool: EndpointPool) -> Any:
    """``work(pool)``; when a member fails it, the pool looks for the members that answer before the next call (as the
    users' calls do), so a member that is down is not asked again and again."""
    try:
        return await work(pool)
    except (grpc.aio.AioRpcError, asyncio.TimeoutError):
        pool.rediscover()
        raise


def with_probe(settings: EtcdSettings, work):
    """Run ``work(pool)`` on a one-connection pool of its own (the master's checks run no users)."""
    probe = EndpointPool(replace(settings, conns=1), says_membership=False)
    loop = bridge.bridge()
    try:
        loop.run(probe.open)
        return loop.run(work, probe)
    except grpc.aio.AioRpcError as error:
        raise EndpointError(access_problem(error, settings)) from None
    finally:
        loop.run(probe.close)
