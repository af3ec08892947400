"""The ready workloads' results, gathered on the loop thread and handed to the gevent thread in batches.

Each request of a user's loop on the loop thread adds one result, ``(name, seconds, ended, response length, error
label or None, intended seconds or None, the user's client)``, ``ended`` on ``time.perf_counter()``'s clock. Every
``FLUSH_SECONDS``, or as soon as ``BATCH_MAX`` results wait, the batch goes to the gevent thread in one hand-off, where
each listener of Locust's ``request`` event gets it:

- Locust's own listener (its statistics: the web UI, the CSV files, the fail ratio, its percentiles) through
  ``locust_adapter.log_batch``, each result at the time it ended (one by one, as any other listener, on a Locust
  that lacks what that takes: ``locust_adapter.batch_logging_missing``);
- the exact latencies' store (``LatencyStore.record_batch``), also each at its time: the per-second files, the
  timeline of a disruption's cost, the gates, the rate held;
- any other listener (an OpenTelemetry export, a locust-plugins listener, a locustfile's own) once per result, with
  the keywords a request of the greenlet path fires, each call on its own as Locust's ``EventHook.fire`` makes it: a
  listener that raises is logged and makes the run exit with 2, and the others and the rest of the batch still get
  their results; a ``StopUser`` (or another of the exceptions Locust lets through) goes to the user whose request it
  was.

The puts a watcher user of the process waits for go along (``watch_acks``: revision and acknowledgement time). What a
read is judged against goes into the audit's notes at once, on the loop thread (``etcd_users.audit_trail.notes``).

``flush()`` applies whatever waits now and returns the time before which every result has been applied: the plugin
calls it when the users have stopped, before anything reads the run's figures, when spawning completes (before
Locust's ``--reset-stats``), and a load shape when one of its levels starts or ends.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import collections
import logging
import time
import weakref
from collections.abc import Callable

import gevent
import gevent.lock

from etcd_users.features.engine.locust_adapter import (
    USER_EXCEPTIONS,
    batch_logging_missing,
    is_locust_listener,
    listener_failed,
    log_batch,
    request_listeners,
)
from etcd_users.latency.store import INTENDED_CONTEXT_KEY, LatencyStore
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.session import ProcessSession
from etcd_users.transport.bridge import Bridge, bridge

logger = logging.getLogger("etcd_users.engine.results")  # the name users' log filters know

REQUEST_TYPE = "etcd"
WATCH_EVENT = "watch/event"  # a watcher user's event of a put of this process
FLUSH_SECONDS = 0.1
BATCH_MAX = 4096  # results that make a batch go at once: a hand-off per 4,096 requests at most


class LoopResults:
    """One process's results of its users on the loop thread, and their way to Locust's ``request`` listeners."""

    def __init__(self, bridge: Bridge, environment, watchers: Callable[[], ProcessWatchers]) -> None:
        self.environment = environment
        self._watchers = watchers  # the process's watchers of the current run (made afresh at each run's start)
        # this Locust's statistics take a batch at once, or each result as its listener would (told at the run's start)
        self.batch_logging = batch_logging_missing() is None
        # loop thread: appended by the users' coroutines, handed over whole
        self.items: list[tuple] = []
        self.watch_acks: list[tuple[int, float]] = []
        self._bridge = bridge
        self._clients: weakref.WeakSet = weakref.WeakSet()  # the users' clients (loop thread)
        self._timer: asyncio.TimerHandle | None = None
        # gevent thread: batches received, applied in their order, one at a time
        self._received: collections.deque = collections.deque()
        self._applying = gevent.lock.Semaphore()
        self._scheduled = False
        bridge.post(self._tick)

    # loop thread

    def _tick(self) -> None:
        self.hand_over()
        self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._tick)

    def hand_over(self) -> None:
        """Send what waits to the gevent thread (a coroutine calls it when ``BATCH_MAX`` results wait)."""
        if self.items or self.watch_acks:
            self._bridge.deliver(self._receive, self._take())

    def _take(self) -> tuple[list, list]:
        batch = (self.items, self.watch_acks)
        self.items, self.watch_acks = [], []
        return batch

    async def _take_now(self) -> tuple[tuple[list, list], float]:
        """The results of the requests that ended before a time, and that time: now, or the status of a call whose
        user has not had its answer yet (its result comes later); the later results wait for the next batch."""
        until = min((client.status_at for client in self._clients if client.status_at), default=time.perf_counter())
        items, watch_acks = self._take()
        later = [item for item in items if item[2] >= until]
        if later:
            self.items = later
            items = [item for item in items if item[2] < until]
        return (items, watch_acks), until

    def register(self, client) -> None:
        """A user's client adds its results here (``_take_now`` looks at its call on the wire)."""
        self._clients.add(client)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    # gevent thread

    def _receive(self, batch: tuple[list, list]) -> None:
        """In the hub: keep the batch, and let a greenlet apply it (a listener may block; the hub must not)."""
        self._received.append(batch)
        if not self._scheduled:
            self._scheduled = True
            gevent.spawn(self._apply_received)

    def flush(self) -> float:
        """Apply every result the users' coroutines have made so far (on the gevent thread, outside the hub); returns
        the time (``time.time()``) before which every request of theirs that ended has been applied."""
        until = time.time()
        if not self._bridge.closed:  # a process that ends on bad input has closed its loop: nothing ran since
            batch, taken = self._bridge.run(self._take_now)
            self._received.append(batch)
            until = taken + (time.time() - time.perf_counter())
        self._apply_received()
        return until

    def close(self) -> None:
        """Stop handing over (the session closes); what waits is applied first."""
        self.flush()
        if not self._bridge.closed:
            self._bridge.post(self._stop_timer)

    def _apply_received(self) -> None:
        with self._applying:
            self._scheduled = False
            while self._received:
                items, watch_acks = self._received.popleft()
                if items:
                    self._apply(items)
                if watch_acks:
                    self._acknowledge_watches(watch_acks)

    def _apply(self, items: list[tuple]) -> None:
        offset = time.time() - time.perf_counter()
        timed = [
            (name, seconds, ended + offset, length, label, intended)
            for name, seconds, ended, length, label, intended, _client in items
        ]
        runner = self.environment.runner
        for handler in request_listeners(self.environment):
            try:
                owner = getattr(handler, "__self__", None)
                if isinstance(owner, LatencyStore):
                    owner.record_batch(REQUEST_TYPE, timed)
                elif runner is not None and self.batch_logging and is_locust_listener(handler):
                    log_batch(runner.stats, REQUEST_TYPE, timed)
                else:
                    _fire_each(handler, timed, items)
            except Exception:  # the tool's own batch listeners: as Locust's EventHook.fire treats a listener's failure
                listener_failed()

    def _acknowledge_watches(self, watch_acks: list[tuple[int, float]]) -> None:
        """The puts a watcher user of this process times its events from (``watch/event`` rows, as
        ``EtcdClient.put`` reports them on the greenlet path)."""
        latencies = self._watchers().latencies
        if latencies is None:
            return
        fire = self.environment.events.request.fire

        def report(seconds: float) -> None:
            fire(
                request_type=REQUEST_TYPE,
                name=WATCH_EVENT,
                response_time=seconds * 1000.0,
                response_length=0,
                exception=None,
            )

        for revision, at in watch_acks:
            latencies.acknowledged(revision, at, report)


def _fire_each(handler, timed: list[tuple], items: list[tuple]) -> None:
    """A listener the batch has no shortcut for: each result as the greenlet path fires it, each call on its own."""
    for (name, seconds, at, length, label, intended), item in zip(timed, items, strict=True):
        try:
            handler(
                request_type=REQUEST_TYPE,
                name=name,
                response_time=seconds * 1000.0,
                response_length=length,
                exception=label,
                context={INTENDED_CONTEXT_KEY: intended * 1000.0} if intended is not None else {},
                start_time=at - seconds,
            )
        except USER_EXCEPTIONS as exception:  # the user's, as on its greenlet: it stops (or moves on) there
            item[6].deliver(exception)
        except Exception:
            listener_failed()


def loop_results(context) -> LoopResults:
    """Where the session's users on the loop thread add their results, made on first use; closed with the session."""
    return context.get(ProcessSession).companion(
        LoopResults, lambda: LoopResults(bridge(), context.environment, lambda: context.get(ProcessWatchers))
    )


def flush_loop_results(context) -> float | None:
    """Apply every result of the users on the loop thread so far (before anything reads the run's figures); returns
    the time before which every one of them has been applied, None when no user ran on the loop thread."""
    results = context.get(ProcessSession).companion_if_any(LoopResults)
    return results.flush() if results is not None else None
