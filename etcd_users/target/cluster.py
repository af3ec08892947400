"""The cluster a run loads: the endpoints given, or a local etcd started for the run; checked before the load
starts (every endpoint answers, the prefix is free, the user may write there) and cleaned after it
(``--etcd-cleanup``).

These checks run on the master (or the single process), which runs no users: each on a one-connection probe pool
of its own.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import os
import shlex

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.core.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.local import (
    ELECTION_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    ClusterError,
    EtcdBinary,
    LocalCluster,
    choose_etcd_binary,
    cluster_from_settings,
)
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.settings.connection import COMPACTION_RETENTION_FLAG, LOCAL_BINARY_FLAG
from etcd_users.settings.network import ELECTION_FLAG, HEARTBEAT_FLAG, PEER_RTT_FLAG, ZONE_RTT_FLAG, ZONES_FLAG
from etcd_users.target.action_table import ACTIONS, UPGRADE_FLAG
from etcd_users.transport.access import PERMISSION_DENIED, access_problem, grant, who
from etcd_users.transport.errors import EndpointError, error_detail
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import with_probe
from etcd_users.workload_model.keys import prefix_range_end

logger = logging.getLogger("etcd_users.target_cluster")  # the name users' log filters know


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
            cluster = self.local or self._start_local(settings)
            options.etcd_endpoints = ",".join(cluster.endpoints)
            settings = settings_from_options(options)
        elif self.local is None:
            for flag, given, what in (
                (LOCAL_BINARY_FLAG, settings.local_binary, "the etcd the tool starts"),
                (UPGRADE_FLAG, settings.disruptions.upgrade_binary, "the etcd the tool upgrades its local etcd to"),
            ):
                if given.strip():
                    raise SettingsError(
                        f"{flag}: chooses {what}, and --etcd-endpoints gives a cluster of your own; leave one of "
                        "them out"
                    )
            for flag, given in (
                (PEER_RTT_FLAG, settings.local_peer_rtt),
                (ZONES_FLAG, settings.local_zones),
                (ZONE_RTT_FLAG, settings.local_zone_rtt),
                (HEARTBEAT_FLAG, settings.local_heartbeat),
                (ELECTION_FLAG, settings.local_election),
            ):
                if given:
                    raise SettingsError(
                        f"{flag}: sets the network of the local etcd the tool starts, and --etcd-endpoints gives a "
                        "cluster of your own; leave one of them out"
                    )
            if settings.local_compaction_retention:
                raise SettingsError(
                    f"{COMPACTION_RETENTION_FLAG}: sets the compaction of the local etcd the tool starts, and "
                    "--etcd-endpoints gives a cluster of your own (--etcd-compact-interval compacts it); leave one of "
                    "them out"
                )
        if self.local is not None:  # the web UI's form may bring another
            upgrade = choose_upgrade_binary(settings.disruptions.upgrade_binary, self.local.binary)
            self.local.upgrade_binary = upgrade.path if upgrade else None
            _check_proxy(self.local, settings)
        return settings

    def _start_local(self, settings: EtcdSettings) -> LocalCluster:
        members, enable_pprof = settings.local_members, settings.monitoring.local_pprof
        cluster, binary = cluster_from_settings(settings, members, enable_pprof=enable_pprof)
        # an unknown one is refused before any etcd starts
        upgrade = choose_upgrade_binary(settings.disruptions.upgrade_binary, binary.path)
        cluster.upgrade_binary = upgrade and upgrade.path
        cluster.start()
        self.local = cluster
        logger.info(
            "started a local etcd (%d member%s, etcd %s at %s%s%s): %s; %s%s",
            members,
            "s" * (members > 1),
            binary.version,
            binary.path,
            ", pprof on" if enable_pprof else "",
            _network(cluster, settings),
            ",".join(cluster.endpoints),
            cluster.describe_space(),  # quota and auto-compaction (etcd_users.local.space)
            f"; upgrades to etcd {upgrade.version} at {upgrade.path}" if upgrade else "",
        )
        return cluster

    def stop_local(self) -> None:
        if self.local is not None:
            self.local.stop()
            self.local = None


def _check_proxy(cluster: LocalCluster, settings: EtcdSettings) -> None:
    """A schedule that acts in the peer proxy on a local etcd started without it (a web UI run after one without)."""
    item = settings.disruptions.in_proxy
    if item is not None and cluster.peer_links is None:
        raise SettingsError(
            f"--etcd-disrupt: {shown(item.text)} {ACTIONS[item.action].in_proxy} in the peer proxy, and the local etcd "
            f"started without it; start the tool again with this schedule, or with {PEER_RTT_FLAG} 0ms"
        )


def _network(cluster: LocalCluster, settings: EtcdSettings) -> str:
    """The members' network and raft timing in a few words, when they are not the defaults."""
    network = cluster.describe_peer_network()
    words = f", {network}" if network else ""
    if network and settings.local_peer_rtt is None:  # started for the schedule
        words += f" (for {settings.disruptions.in_proxy.text})"
    if (cluster.heartbeat_ms, cluster.election_ms) != (HEARTBEAT_INTERVAL_MS, ELECTION_TIMEOUT_MS):
        words += f", heartbeat {cluster.heartbeat_ms} ms, election timeout {cluster.election_ms} ms"
    return words


def choose_upgrade_binary(choice: str, first: str) -> EtcdBinary | None:
    """The etcd ``--etcd-upgrade-binary`` names (None: not given), another than the local etcd's ``first``."""
    if not choice.strip():
        return None
    upgrade = choose_etcd_binary(choice, UPGRADE_FLAG)
    if os.path.realpath(upgrade.path) == os.path.realpath(first):
        raise ClusterError(
            f"{UPGRADE_FLAG}: {shown(choice.strip(), SHOWN_PATH_CHARACTERS)} is the etcd the local etcd runs already "
            f"({upgrade.version} at {upgrade.path}); give another, or choose the first with {LOCAL_BINARY_FLAG}"
        )
    return upgrade


# put and deleted again at start, under the prefix: a user that may only read fails here, not on every request
WRITE_CHECK_KEY = b"__write_check__"


def _write_problem(error: grpc.aio.AioRpcError, settings: EtcdSettings, roles: tuple[str, ...]) -> str:
    """What a refused write at start means: the run's puts would all fail the same way."""
    prefix = shown(settings.prefix.decode(errors="replace"))
    detail = error_detail(error)
    if detail == PERMISSION_DENIED:
        return (
            f"{who(settings)} may read {prefix} but not write it ({detail}), and every workload writes (reads "
            f"first write their key space); {grant(settings, roles)} or use another --etcd-prefix"
        )
    if "database space exceeded" in detail:
        return (
            f"etcd refused a write under {prefix} at start ({detail}): its db is full; compact and defragment it "
            "and disarm the alarm (etcdctl alarm disarm), or raise its --quota-backend-bytes"
        )
    return f"etcd refused a write under {prefix} at start: {detail}"


async def _roles(pool: EndpointPool) -> tuple[str, ...]:
    """The roles of --etcd-user, which etcd tells a user about itself; () when it does not."""
    user = pool.settings.credentials.user
    if not user:
        return ()
    connection = pool.next_connection()
    try:
        response = await connection.auth.UserGet(
            rpc_pb2.AuthUserGetRequest(name=user), timeout=pool.settings.timeout, metadata=connection.metadata
        )
    except grpc.aio.AioRpcError:
        return ()
    return tuple(response.roles)


async def _count_prefix(pool: EndpointPool) -> int:
    connection = pool.next_connection()
    prefix = pool.settings.prefix
    response = await connection.kv.Range(
        rpc_pb2.RangeRequest(key=prefix, range_end=prefix_range_end(prefix), count_only=True),
        timeout=pool.settings.timeout,
        metadata=connection.metadata,
    )
    return response.count


async def _write_check(pool: EndpointPool) -> None:
    """Put one key under the prefix and delete it: what every run does first, tried once at start."""
    settings = pool.settings
    key = settings.prefix + WRITE_CHECK_KEY
    connection = pool.next_connection()
    await connection.kv.Put(
        rpc_pb2.PutRequest(key=key, value=b""), timeout=settings.timeout, metadata=connection.metadata
    )
    await connection.kv.DeleteRange(
        rpc_pb2.DeleteRangeRequest(key=key), timeout=settings.timeout, metadata=connection.metadata
    )


async def _check_prefix(pool: EndpointPool) -> int:
    """The keys under the prefix; when the run may go on among them (or there are none), a write there too."""
    settings = pool.settings
    try:
        existing = await _count_prefix(pool)
    except grpc.aio.AioRpcError as error:
        if error_detail(error) != PERMISSION_DENIED:
            raise
        raise EndpointError(access_problem(error, settings, await _roles(pool))) from None
    if existing and not settings.allow_existing:
        return existing
    try:
        await _write_check(pool)
    except grpc.aio.AioRpcError as error:
        raise EndpointError(_write_problem(error, settings, await _roles(pool))) from None
    return existing


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
    """The endpoints answer (and the leader is known), the prefix is free unless --etcd-allow-existing, and the
    user may write there (a put and a delete of ``PREFIX__write_check__``).

    The prefix ends in '/' (``settings.parse_prefix``): the keys counted here are exactly those ``--etcd-cleanup``
    and the suggested ``etcdctl del --prefix`` delete, none of a neighbouring application's.
    """
    existing = with_probe(settings, _check_prefix)
    if existing and not settings.allow_existing:
        prefix = settings.prefix.decode(errors="replace")
        raise SettingsError(
            f"--etcd-prefix: {shown(prefix)} already holds {existing} key{'s' * (existing != 1)}; pass "
            "--etcd-allow-existing to run among them, choose another --etcd-prefix, or delete them "
            f"(etcdctl del --prefix {shlex.quote(prefix) if len(prefix) <= 200 else 'PREFIX'})"
        )


def delete_prefix(settings: EtcdSettings) -> None:
    """``--etcd-cleanup``: every key under the prefix, and only there."""
    deleted = with_probe(settings, _delete_prefix)
    logger.info("deleted %d keys under %r", deleted, settings.prefix.decode(errors="replace"))
