"""The cluster a run loads: the endpoints given, or a local etcd started for the run; checked before the load
starts (every endpoint answers, the prefix is free) and cleaned after it (``--etcd-cleanup``).

These checks run on the master (or the single process), which runs no users: each on a one-connection probe pool
of its own.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
from dataclasses import replace

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.cluster import LocalCluster
from etcd_users.keys import prefix_range_end
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError, error_detail
from etcd_users.transport.pool import EndpointPool

logger = logging.getLogger(__name__)


class TargetCluster:
    """What the run targets; the local etcd, when it was needed, is started once and stopped by ``stop_local``."""

    def __init__(self) -> None:
        self.local: LocalCluster | None = None

    def settings(self, options) -> EtcdSettings:
        """Validated settings; with no endpoints given, those of the local etcd (started on first need).

        The local endpoints are written into ``options``: the master sends them to its workers with the rest.
        """
        settings = settings_from_options(options)
        if not settings.endpoints:
            cluster = self.local or self._start_local(settings.local_members)
            options.etcd_endpoints = ",".join(cluster.endpoints)
            settings = settings_from_options(options)
        return settings

    def _start_local(self, members: int) -> LocalCluster:
        cluster = LocalCluster(members=members)
        cluster.start()
        self.local = cluster
        logger.info("started a local etcd (%d member%s): %s", members, "s" * (members > 1), ",".join(cluster.endpoints))
        return cluster

    def stop_local(self) -> None:
        if self.local is not None:
            self.local.stop()
            self.local = None


def with_probe(settings: EtcdSettings, work):
    """Run ``work(pool)`` on a one-connection pool of its own (the master's checks run no users)."""
    probe = EndpointPool(replace(settings, conns=1))
    loop = bridge.bridge()
    try:
        loop.run(probe.open)
        return loop.run(work, probe)
    except grpc.aio.AioRpcError as error:
        raise EndpointError(_access_problem(error, settings)) from None
    finally:
        loop.run(probe.close)


def _access_problem(error: grpc.aio.AioRpcError, settings: EtcdSettings) -> str:
    """What an etcd refusal at start means for the options."""
    prefix = settings.prefix.decode(errors="replace")
    detail = error_detail(error)
    if detail == "etcdserver: user name is empty":
        return f"etcd has authentication enabled ({detail}); pass --etcd-user NAME:PASSWORD"
    if detail == "etcdserver: permission denied":
        return (
            f"--etcd-user {settings.credentials.user!r} may not read and write {prefix!r} ({detail}); grant its role "
            f"readwrite on the prefix (etcdctl role grant-permission ROLE --prefix readwrite {prefix!r}) or use "
            "another --etcd-prefix"
        )
    return f"etcd refused the start-up check under {prefix!r}: {detail}"


async def _count_prefix(pool: EndpointPool) -> int:
    connection = pool.next_connection()
    prefix = pool.settings.prefix
    response = await connection.kv.Range(
        rpc_pb2.RangeRequest(key=prefix, range_end=prefix_range_end(prefix), count_only=True),
        timeout=pool.settings.timeout,
        metadata=connection.metadata,
    )
    return response.count


async def _delete_prefix(pool: EndpointPool) -> int:
    connection = pool.next_connection()
    prefix = pool.settings.prefix
    response = await connection.kv.DeleteRange(
        rpc_pb2.DeleteRangeRequest(key=prefix, range_end=prefix_range_end(prefix)),
        timeout=pool.settings.timeout,
        metadata=connection.metadata,
    )
    return response.deleted


def check_prefix_free(settings: EtcdSettings) -> None:
    """The endpoints answer (and the leader is known), and the prefix is free unless --etcd-allow-existing."""
    existing = with_probe(settings, _count_prefix)
    if existing and not settings.allow_existing:
        prefix = settings.prefix.decode(errors="replace")
        raise SettingsError(
            f"--etcd-prefix: {prefix!r} already holds {existing} keys; pass --etcd-allow-existing to run among them, "
            f"choose another --etcd-prefix, or delete them (etcdctl del --prefix {prefix!r})"
        )


def delete_prefix(settings: EtcdSettings) -> None:
    """``--etcd-cleanup``: every key under the prefix, and only there."""
    deleted = with_probe(settings, _delete_prefix)
    logger.info("deleted %d keys under %r", deleted, settings.prefix.decode(errors="replace"))
