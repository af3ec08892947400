"""The gevent side of a watcher user: open its watchers, then report, until it stops, the delivery latencies of
this process's writes (``watch/event``) and the watchers etcd cancelled (failures of ``watch/event`` under etcd's
reason). The events themselves are counted on the loop thread, not one Locust request each: a thousand watchers
on a busy prefix would spend the process on Locust's statistics."""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time
from collections.abc import Callable

import gevent
from etcd3.etcdrpc import rpc_pb2

from etcd_users.core.run_context import run_context
from etcd_users.features.watchers.streams import PrefixWatchers
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import Connection
from etcd_users.user_base.client import REQUEST_TYPE, EtcdClient
from etcd_users.workload_model.keys import prefix_range_end

NAME = "watch/event"
_TICK = 0.25  # seconds between the process's reports
# seconds between the other users' looks at whether the run goes on: one user reports for the process (the
# latencies and cancels are the process's), so 10,000 watcher users do not wake 40,000 times a second
_IDLE_TICK = 2.0
_RETRY_PAUSE = 1.0  # seconds before a user whose watchers could not be opened tries again


def watched_range(settings: EtcdSettings) -> tuple[bytes, bytes]:
    """The whole prefix, or the first ``--etcd-watch-keys`` keys of the key space as one range."""
    if settings.watch.keys == 0:
        return settings.prefix, prefix_range_end(settings.prefix)
    width = settings.key_width
    last = settings.prefix + b"%0*d" % (width, settings.watch.keys - 1)
    return settings.prefix + b"%0*d" % (width, 0), last + b"\0"


class WatcherClient:
    def __init__(self, etcd: EtcdClient) -> None:
        self.etcd = etcd
        self._context = run_context(etcd.environment)
        self._fire = etcd.environment.events.request.fire
        self._fire_delivery = etcd.watch_reporter(NAME)
        self._watchers: PrefixWatchers | None = None

    def run(self, running: Callable[[], bool]) -> None:
        process = self._context.get(ProcessWatchers)
        latencies = process.start_matching()
        session = self.etcd.session
        while running():
            if self._watchers is None:
                try:
                    self._watchers = session.bridge.run(_open, session, process, self._counts())
                except Exception as error:  # etcd's or gRPC's: counted under its label, tried again
                    self._fire_failure(error_label(error))
                    gevent.sleep(_RETRY_PAUSE)
                    continue
            if process.reporter is None:
                process.reporter = self
            if process.reporter is not self:
                gevent.sleep(_IDLE_TICK)
                continue
            gevent.sleep(_TICK)
            while process.cancelled:
                self._fire_failure(process.cancelled.popleft())
            latencies.deliver(self._fire_delivery, time.perf_counter())

    def stop(self) -> None:
        process = self._context.get(ProcessWatchers)
        if process.reporter is self:
            process.reporter = None  # another user takes over at its next look
        if self._watchers is not None:
            self.etcd.session.bridge.post(self._watchers.cancel)
            self._watchers = None

    def _counts(self):
        record = self.etcd._record
        return record.watches if record is not None else None

    def _fire_failure(self, label: str) -> None:
        self._fire(request_type=REQUEST_TYPE, name=NAME, response_time=0.0, response_length=0, exception=label)


async def _open(session, process: ProcessWatchers, counts) -> PrefixWatchers:
    settings = session.settings
    watch = settings.watch
    connection: Connection = session.pool.next_connection()
    key, range_end = watched_range(settings)
    start = watch.start_rev
    if start < 0:
        response = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=key, range_end=range_end, count_only=True),
            timeout=settings.timeout,
            metadata=connection.metadata,
        )
        start = max(1, response.header.revision + start)
    request = rpc_pb2.WatchCreateRequest(
        key=key, range_end=range_end, start_revision=start, prev_kv=watch.prev_kv, progress_notify=watch.progress_notify
    )
    delays = []
    for _ in range(settings.watch_streams):
        slow = watch.consume_delay > 0 and process.is_slow(process.streams, watch.slow_fraction)
        delays.append(watch.consume_delay if slow else 0.0)
        process.streams += 1
    watchers = PrefixWatchers(
        connection,
        request,
        settings.watch_streams,
        settings.watchers_per_stream,
        delays,
        process,
        counts,
        session.pool.another_connection,
    )
    try:
        await watchers.start(settings.timeout)
    except BaseException:
        watchers.cancel()
        raise
    return watchers
