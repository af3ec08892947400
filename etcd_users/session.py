"""The life of a run in one process: settings, the local etcd, the connection pool, and their end.

At ``init`` the master (or the single process) validates the options, starts a local etcd when no endpoints are
given and checks that the endpoints answer, so bad input ends the run at once with one line. Each process that
runs users opens its own pool on first use, after Locust has forked.
"""

from locust import events
from locust.exception import StopUser
from locust.runners import WorkerRunner

import asyncio
import logging
import signal
import sys
import time
from dataclasses import replace

import gevent
import gevent.lock
import greenlet
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users import preflight_report, server_metrics, transport
from etcd_users.cluster import ClusterError, LocalCluster
from etcd_users.endpoints import EndpointError, EndpointPool, error_detail
from etcd_users.keys import KeySpace, prefix_range_end
from etcd_users.options import EtcdSettings, SettingsError, settings_from_options

logger = logging.getLogger(__name__)

_POPULATE_CONCURRENCY = 64


class Session:
    """Settings, transport and connections of one process for one run."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings)
        self.bridge = transport.bridge()
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


_sessions: dict[int, Session] = {}
_last_session_error = [""]
_session_lock = gevent.lock.Semaphore()
_local_cluster: LocalCluster | None = None
_run_settings: EtcdSettings | None = None  # the master's (or single process's), for the clean-up at the end


def current(environment) -> Session:
    """This process's session for the environment's current options, opened on first use."""
    session = _sessions.get(id(environment))
    if session is None:
        with _session_lock:
            session = _sessions.get(id(environment))
            if session is None:
                try:
                    session = Session(settings_from_options(environment.parsed_options))
                except (SettingsError, EndpointError) as error:
                    # a worker's users cannot start (the master checked the endpoints, but this process may not
                    # reach them): one line for the process, not a traceback per user
                    if str(error) != _last_session_error[0]:
                        logger.error("locust-etcd: error: %s", error)
                        _last_session_error[0] = str(error)
                    raise StopUser() from None
                _sessions[id(environment)] = session
    return session


def _close_sessions() -> None:
    while _sessions:
        _, session = _sessions.popitem()
        try:
            session.close()
        except Exception as error:  # closing is best effort: the run is over
            logger.debug("closing etcd connections: %s", error)


def _fail(message: str) -> None:
    """End the process with one line: bad input is the user's to fix, not a traceback to read."""
    first_line = message.splitlines()[0] if message else "unknown error"
    sys.stderr.write(f"locust-etcd: error: {first_line}\n")
    sys.stderr.flush()
    transport.close_bridge()
    _stop_local_cluster()
    sys.exit(2)


def _start_local_cluster(members: int) -> LocalCluster:
    global _local_cluster
    cluster = LocalCluster(members=members)
    cluster.start()
    _local_cluster = cluster
    logger.info("started a local etcd (%d member%s): %s", members, "s" * (members > 1), ",".join(cluster.endpoints))
    return cluster


def _stop_local_cluster() -> None:
    global _local_cluster
    if _local_cluster is not None:
        _local_cluster.stop()
        _local_cluster = None


def _with_probe(settings: EtcdSettings, work):
    """Run ``work(pool)`` on a one-connection pool of its own (the master's checks run no users)."""
    probe = EndpointPool(replace(settings, conns=1))
    bridge = transport.bridge()
    try:
        bridge.run(probe.open)
        return bridge.run(work, probe)
    except grpc.aio.AioRpcError as error:
        raise EndpointError(_access_problem(error, settings)) from None
    finally:
        bridge.run(probe.close)


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


def preflight(settings: EtcdSettings) -> None:
    """The endpoints answer (and the leader is known), and the prefix is free unless --etcd-allow-existing."""
    existing = _with_probe(settings, _count_prefix)
    if existing and not settings.allow_existing:
        prefix = settings.prefix.decode(errors="replace")
        raise SettingsError(
            f"--etcd-prefix: {prefix!r} already holds {existing} keys; pass --etcd-allow-existing to run among them, "
            f"choose another --etcd-prefix, or delete them (etcdctl del --prefix {prefix!r})"
        )


def cleanup(settings: EtcdSettings) -> None:
    deleted = _with_probe(settings, _delete_prefix)
    logger.info("deleted %d keys under %r", deleted, settings.prefix.decode(errors="replace"))


def _settings_with_endpoints(options) -> EtcdSettings:
    """Validated settings; with no endpoints given, those of the local etcd (started on first need)."""
    settings = settings_from_options(options)
    if not settings.endpoints:
        cluster = _local_cluster or _start_local_cluster(settings.local_members)
        options.etcd_endpoints = ",".join(cluster.endpoints)
        settings = settings_from_options(options)
    return settings


def _interrupt_main_greenlet_on_ctrl_c(main) -> None:
    """Ctrl-C as Locust expects it: KeyboardInterrupt in its main greenlet, which shuts the run down cleanly.

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives; with busy users that is a user's
    greenlet, which dies with a traceback while the run ends without its summary.
    """

    def interrupt() -> None:
        if not main.dead:
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGINT, interrupt)


@events.init.add_listener
def _on_init(environment, runner=None, **_kwargs) -> None:
    global _run_settings
    _interrupt_main_greenlet_on_ctrl_c(greenlet.getcurrent())  # Locust fires init in its main greenlet
    if isinstance(runner, WorkerRunner) or not hasattr(environment.parsed_options, "etcd_endpoints"):
        return  # workers take their options from the master when a run starts
    try:
        settings = _settings_with_endpoints(environment.parsed_options)
        preflight(settings)
    except (SettingsError, EndpointError, ClusterError) as error:
        _fail(str(error))
    _run_settings = settings
    # informs only (versions, db size against quota, fsync P99 under a short burst); never stops the run
    preflight_report.report(settings, environment.parsed_options, _with_probe)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs) -> None:
    """A new run may come with new options (the web UI's form, or the master's): reconnect with them."""
    global _run_settings
    options = environment.parsed_options
    if not hasattr(options, "etcd_endpoints"):
        return
    is_worker = isinstance(environment.runner, WorkerRunner)
    try:
        # the master resolves the endpoints before it sends the options to the workers
        settings = settings_from_options(options) if is_worker else _settings_with_endpoints(options)
    except (SettingsError, ClusterError) as error:
        logger.error("locust-etcd: error: %s", error)
        if environment.runner is not None:
            gevent.spawn(environment.runner.stop)
        return
    if not is_worker:
        _run_settings = settings
        server_metrics.start_polling(environment, settings)
    session = _sessions.get(id(environment))
    if session is not None and session.settings != settings:
        _sessions.pop(id(environment), None)
        session.close()


@events.test_stop.add_listener
def _on_test_stop(environment, **_kwargs) -> None:
    server_metrics.stop_polling(environment)  # with a last row per member: the state at the end


@events.quit.add_listener
def _on_quit(**_kwargs) -> None:
    # on quit, not quitting: Locust fires quitting before it stops users, whose calls would then fail
    server_metrics.stop_polling()  # before the clean-up and the local etcd's end
    _close_sessions()
    if _run_settings is not None and _run_settings.cleanup:
        try:
            cleanup(_run_settings)
        except (EndpointError, SettingsError) as error:
            logger.error("locust-etcd: could not delete the keys under the prefix: %s", error)
    transport.close_bridge()
    _stop_local_cluster()
