"""The gRPC transport: grpc.aio calls run on an event loop in a native thread; Locust's greenlets wait for them.

gevent-patched grpcio costs about three times the CPU of etcd's Go benchmark per request, most of it in grpcio's
gevent integration. Running grpc.aio on its own loop (uvloop) in a real OS thread of the process, with greenlets
handing calls over through two deques, one batched wake-up in each direction, brings the client to the Go
tool's cost. One bridge per process, made lazily after Locust has forked (``--processes``), never at import.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gevent.lock
from gevent import monkey
from gevent.hub import Waiter, get_hub
from grpc._cython import cygrpc

_start_native_thread = monkey.get_original("_thread", "start_new_thread")
_allocate_native_lock = monkey.get_original("_thread", "allocate_lock")


class _NativeThread:
    """What grpc's Cython layer gets for ``threading.Thread``: a real OS thread.

    grpc.aio starts its completion-queue poller with ``threading.Thread``; under monkey patching that becomes a
    greenlet that blocks in C and freezes its whole thread.
    """

    def __init__(self, target=None, name=None, args=(), kwargs=None, daemon=None):
        self.name = name
        self.daemon = daemon
        self._target, self._args, self._kwargs = target, args, kwargs or {}
        self._finished = _allocate_native_lock()
        self._finished.acquire()
        self._alive = False

    def start(self) -> None:
        self._alive = True
        _start_native_thread(self._bootstrap, ())

    def _bootstrap(self) -> None:
        try:
            self._target(*self._args, **self._kwargs)
        finally:
            self._alive = False
            self._finished.release()

    def join(self, timeout: float | None = None) -> None:
        if self._finished.acquire(True, -1 if timeout is None else timeout):
            self._finished.release()

    def is_alive(self) -> bool:
        return self._alive


class _ThreadingWithNativeThreads:
    """The ``threading`` module as grpc's Cython layer should see it under gevent."""

    Thread = _NativeThread

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


if monkey.is_module_patched("threading"):
    cygrpc.threading = _ThreadingWithNativeThreads()


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # asyncio's own loop, on the epoll that gevent's patching hides
        import selectors

        class _NativeEpollSelector(selectors.EpollSelector):
            _selector_cls = monkey.get_original("select", "epoll")

        return asyncio.SelectorEventLoop(_NativeEpollSelector())
    return uvloop.new_event_loop()


class Bridge:
    """Runs coroutines on the loop thread for greenlets of the gevent thread.

    Only the gevent thread touches Locust; only the loop thread touches grpc.aio.
    """

    def __init__(self) -> None:
        self._hub = get_hub()
        self._submissions: collections.deque = collections.deque()
        self._completions: collections.deque = collections.deque()
        self._drain_scheduled = False
        self._wakeup_pending = False
        self._closed = False
        self._wakeup = self._hub.loop.async_()
        self._wakeup.start(self._deliver_completions)
        self._loop = _new_event_loop()
        self._stopped = _allocate_native_lock()
        self._stopped.acquire()
        started = _allocate_native_lock()
        started.acquire()
        _start_native_thread(self._run_loop, (started,))
        started.acquire()  # the loop is up within microseconds; nothing of the network is awaited here

    def _run_loop(self, started) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(started.release)
        self._loop.run_forever()
        # finish what is still pending (stream readers, a rediscovery) so nothing is destroyed half-way at exit
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()
        self._stopped.release()

    # gevent side

    def call(self, function: Callable[..., Awaitable], *args, **kwargs) -> tuple[Any, BaseException | None, float]:
        """Await ``function(*args, **kwargs)`` on the loop; return (result, error, seconds it took there).

        ``function`` is called on the loop thread: grpc.aio binds a call to the loop it is made on.
        """
        if self._closed:
            raise RuntimeError("the etcd transport is closed")
        waiter = Waiter(self._hub)
        self._submissions.append((function, args, kwargs, waiter))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon_threadsafe(self._drain_submissions)
        return waiter.get()

    def run(self, function: Callable[..., Awaitable], *args, **kwargs) -> Any:
        """Await ``function(*args, **kwargs)`` on the loop and return its result, raising its error."""
        result, error, _ = self.call(function, *args, **kwargs)
        if error is not None:
            raise error
        return result

    def post(self, function: Callable[..., Any], *args) -> None:
        """Call ``function(*args)`` on the loop thread, without waiting."""
        self._loop.call_soon_threadsafe(function, *args)

    def _deliver_completions(self) -> None:
        self._wakeup_pending = False
        completions = self._completions
        while completions:
            waiter, outcome = completions.popleft()
            waiter.switch(outcome)

    def close(self, cleanup: Callable[[], Awaitable] | None = None, timeout: float = 5.0) -> None:
        """Run ``cleanup`` (closing channels) on the loop, then stop the loop thread."""
        if self._closed:
            return
        if cleanup is not None:
            with gevent.Timeout(timeout, False):
                self.call(cleanup)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._stopped.acquire(True, timeout)  # the process may exit next: let the loop thread finish first
        self._wakeup.stop()

    # loop side

    def _drain_submissions(self) -> None:
        self._drain_scheduled = False
        submissions = self._submissions
        create_task = self._loop.create_task
        while submissions:
            function, args, kwargs, waiter = submissions.popleft()
            create_task(self._timed(waiter, function, args, kwargs))

    async def _timed(self, waiter: Waiter, function: Callable[..., Awaitable], args: tuple, kwargs: dict) -> None:
        started = time.perf_counter()
        try:
            outcome = (await function(*args, **kwargs), None, time.perf_counter() - started)
        except BaseException as error:  # handed to the waiting greenlet, which decides what it means
            outcome = (None, error, time.perf_counter() - started)
        self._completions.append((waiter, outcome))
        if not self._wakeup_pending:
            self._wakeup_pending = True
            self._wakeup.send()


_bridge: Bridge | None = None
_bridge_lock = gevent.lock.Semaphore()


def bridge() -> Bridge:
    """This process's bridge, made on first use (after any fork)."""
    global _bridge
    if _bridge is None:
        with _bridge_lock:
            if _bridge is None:
                _bridge = Bridge()
    return _bridge


def close_bridge(cleanup: Callable[[], Awaitable] | None = None) -> None:
    global _bridge
    if _bridge is not None:
        _bridge.close(cleanup)
        _bridge = None
