"""The client's own side of a slow second, in every Locust process: Python's garbage collector stopping every thread,
the users' thread and the transport's loop thread waking late, and the connection pool leaving out a member and
taking it back (its log lines, ``etcd_users.transport.pool``).

Each is noted as an ``Event`` of the process (``local``, ``master``, or the worker, whose events go to the master with
its reports). Nothing runs on the request path: a GC callback reads a clock twice per collection, a greenlet and a
loop callback wake ten times a second.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import gc
import logging
import time
from collections import deque

import gevent

from etcd_users.features.tail.events import Event
from etcd_users.transport import bridge

GC_PAUSE_MS = 50.0  # a collection that long stops every request of the process for a visible share of a second
LAG_MS = 50.0  # a thread that wakes this late held its requests' completions as long
TICK_S = 0.1
POOL_LOGGER = "etcd_users.transport.pool"
MAX_KEPT = 10_000  # a process's events not yet handed over (the oldest go first)


class ClientSignals:
    """One process's client events, from ``start()`` until ``stop()``; ``take()`` hands them over."""

    def __init__(self, process: str) -> None:
        self.process = process
        self._events: deque[Event] = deque(maxlen=MAX_KEPT)  # appended from any thread
        self._gc_started: tuple[float, float] | None = None
        self._ticker: gevent.Greenlet | None = None
        self._pool_handler = _PoolLines(self)
        # thread -> (second, the worst lag noted in it, ms): each thread writes only its own entry
        self._worst_lag: dict[str, tuple[int, float]] = {}

    def take(self) -> list[Event]:
        taken = []
        while self._events:
            taken.append(self._events.popleft())
        return taken

    def note(self, event: Event) -> None:
        self._events.append(event)

    # -- garbage collection --

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = (time.perf_counter(), time.time())
            return
        if self._gc_started is None:
            return
        began, wall = self._gc_started
        self._gc_started = None
        paused_ms = (time.perf_counter() - began) * 1000.0
        if paused_ms >= GC_PAUSE_MS:
            evidence = (
                f"Python's GC (generation {info.get('generation')}) stopped the process for {paused_ms:.0f} ms, "
                f"{info.get('collected', 0)} objects collected"
            )
            self.note(Event(wall + paused_ms / 1000.0, "client-gc", self.process, evidence, since=wall, size=paused_ms))

    # -- late threads --

    def _tick_forever(self) -> None:
        expected = time.monotonic() + TICK_S
        while True:
            gevent.sleep(max(0.0, expected - time.monotonic()))
            woke = time.monotonic()
            self._lagged("users' thread (gevent)", (woke - expected) * 1000.0)
            expected = max(expected + TICK_S, woke)
            if bridge.loop_thread_id() is not None:
                try:
                    bridge.bridge().post(self._on_loop, time.monotonic())
                except RuntimeError:  # the transport is closing
                    pass

    def _on_loop(self, posted: float) -> None:
        self._lagged("transport's loop thread", (time.monotonic() - posted) * 1000.0)

    def _lagged(self, thread: str, lag_ms: float) -> None:
        if lag_ms < LAG_MS:
            return
        now = time.time()
        noted = self._worst_lag.get(thread)
        if noted is not None and noted[0] == int(now) and lag_ms <= noted[1]:
            return  # one event per thread and second, unless a later one is worse
        self._worst_lag[thread] = (int(now), lag_ms)
        evidence = f"the client's {thread} ran {lag_ms:.0f} ms late"
        self.note(Event(now, "loop-lag", self.process, evidence, since=now - lag_ms / 1000.0, size=lag_ms))

    # -- the run --

    def start(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)
        logging.getLogger(POOL_LOGGER).addHandler(self._pool_handler)
        if self._ticker is None:
            self._ticker = gevent.spawn(self._tick_forever)

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        logging.getLogger(POOL_LOGGER).removeHandler(self._pool_handler)
        if self._ticker is not None:
            self._ticker.kill(block=False)
            self._ticker = None


class _PoolLines(logging.Handler):
    """The pool's own lines when it leaves out a member that does not answer, takes it back, or looks for the leader
    and the live members again after requests failed (``etcd_users.transport.pool.EndpointPool``)."""

    def __init__(self, signals: ClientSignals) -> None:
        super().__init__(logging.INFO)
        self.signals = signals

    def emit(self, record: logging.LogRecord) -> None:
        template, args = str(record.msg), record.args if isinstance(record.args, tuple) else ()
        now = record.created
        process = self.signals.process
        if "does not answer" in template and "skipping it" in template and args:
            evidence = (
                f"the client's pool left {_host(args[0])} out: it did not answer ({args[1] if len(args) > 1 else ''})"
            )
            self.signals.note(Event(now, "member-unanswering", _host(args[0]), evidence, size=1.0))
        elif "answers again" in template and args:
            self.signals.note(
                Event(now, "reconnect", process, f"the client's pool took {_host(args[0])} back", size=1.0)
            )
        elif "looking for the leader and live members again" in template and args:
            evidence = f"requests failed with {args[0]!r}: the client's pool looked for the leader and members again"
            self.signals.note(Event(now, "reconnect", process, evidence, size=1.0))


def _host(url: object) -> str:
    text = str(url)
    return text.split("://", 1)[-1].rstrip("/")
