"""The read key space, written before the measured window: once per run, by the master or the single process.

The workloads that read keys of the key space (a User class with ``reads_key_space``: the range, txn-mixed, mixed and
YCSB users) need ``--etcd-key-space-size`` keys to find (``etcd_users.features.key_space.hooks`` decides when). A
headless run writes them at init: Locust starts the clock of ``-t`` right after ``init`` and fires ``test_start`` later,
inside its runner's start, so a fill there would eat the run time. A run started from the web UI, whose classes and
options come with the start, writes them at test start, before its users spawn. Workers find the key space written. The
fill's puts are no request of the run; its progress is logged every few seconds, its keys and time go to the log and the
run summary.

``Session.ensure_key_space`` (custom users call it) asks ``prepared`` first: nothing to do once this process wrote or
found the key space of the run's settings; the user stops when the fill failed (the end of the run says why).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
import time

import gevent
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import with_probe
from etcd_users.workload_model.keys import KeySpace
from etcd_users.workload_model.preparation import KEY_SPACE, Preparation

logger = logging.getLogger(__name__)

FILL_CONCURRENCY = 64
PROGRESS_SECONDS = 5.0
# a User class that reads keys of the key space, to be written before the run
READS_KEY_SPACE = "reads_key_space"

# this process's fills of the current run, by key space: what Session.ensure_key_space finds done
_prepared: dict[tuple, Preparation] = {}


def key_space_of(settings: EtcdSettings) -> tuple:
    """What makes two runs' key spaces the same keys and values on the same cluster."""
    endpoints = tuple(endpoint.url for endpoint in settings.endpoints)
    return (endpoints, settings.prefix, settings.key_space_size, settings.key_width, settings.val_size)


def prepared(settings: EtcdSettings) -> Preparation | None:
    """This process's fill of the key space of ``settings`` in the current run, or None (not filled here)."""
    return _prepared.get(key_space_of(settings))


def forget_fills() -> None:
    """A new run: the key space may have changed since (a cleanup, another run's deletes)."""
    _prepared.clear()


def reads_key_space(user_classes) -> bool:
    return any(getattr(user_class, READS_KEY_SPACE, False) for user_class in user_classes or ())


async def write_key_space(pool: EndpointPool, keys: KeySpace, progress: Preparation) -> None:
    """Every key of ``keys`` with its value, unless the key space holds them all already; stops at the first refusal
    (its label in ``progress.error``). Runs on the transport's loop thread."""
    settings = pool.settings
    first, end = keys.first_and_end()
    connection = pool.next_connection()
    count = await connection.kv.Range(
        rpc_pb2.RangeRequest(key=first, range_end=end, count_only=True),
        timeout=settings.timeout,
        metadata=connection.metadata,
    )
    if count.count >= keys.size:
        return
    todo = keys.all_keys()

    async def worker() -> None:
        for key in todo:
            if progress.error:
                return
            connection = pool.next_connection()
            request = rpc_pb2.PutRequest(key=key, value=keys.value)
            try:
                await connection.kv.Put(request, timeout=settings.timeout, metadata=connection.metadata)
            except grpc.aio.AioRpcError as error:
                progress.error = progress.error or error_label(error)
                return
            progress.written += 1

    await asyncio.gather(*(worker() for _ in range(FILL_CONCURRENCY)))


def fill_key_space(settings: EtcdSettings, *, inside_run: bool = False) -> Preparation:
    """Write the key space of ``settings`` (what is missing of it) with a progress line every few seconds; the
    result, also kept for ``prepared``."""
    keys = KeySpace(settings)
    progress = Preparation(KEY_SPACE, keys.size, inside_run=inside_run)
    started = time.monotonic()

    def report() -> None:
        while True:
            gevent.sleep(PROGRESS_SECONDS)
            elapsed = time.monotonic() - started
            logger.info(
                "key space: %s of %s keys written (%.0f/s)",
                f"{progress.written:,}",
                f"{keys.size:,}",
                progress.written / elapsed,
            )

    reporter = gevent.spawn(report)
    try:
        with_probe(settings, lambda pool: write_key_space(pool, keys, progress))
    except EndpointError as error:
        progress.error = progress.error or str(error)
    finally:
        reporter.kill(block=False)
        progress.seconds = time.monotonic() - started
    _prepared[key_space_of(settings)] = progress
    where = settings.prefix.decode(errors="replace")
    if progress.error:
        logger.error(
            "locust-etcd: error: key space: the fill stopped after %s of %s keys: %s; the users that read it stop",
            f"{progress.written:,}",
            f"{keys.size:,}",
            progress.error,
        )
    elif progress.written:
        logger.info(
            "key space: %s keys of %d bytes written under %r in %.1fs (%.0f/s), %s",
            f"{progress.written:,}",
            settings.val_size,
            where,
            progress.seconds,
            progress.written / max(progress.seconds, 1e-9),
            "at the run's start, not measured" if inside_run else "before the measured run",
        )
    else:
        logger.info("key space: the %s keys under %r were there already", f"{keys.size:,}", where)
    return progress
