"""The bridge: grpc.aio calls run on an event loop in a native thread; Locust's greenlets wait for them.

gevent-patched grpcio spends most of its CPU per request in grpcio's gevent integration. Here grpc.aio runs on its own
loop (uvloop) in a real OS thread of the process, and greenlets hand calls over through two deques, one batched
wake-up in each direction (``transport.native`` keeps gevent's stand-ins for threads, locks and sockets out of grpc's
internals); ``docs/performance.md`` measures what that costs against a bare grpc.aio loop. The ready workloads skip
the hand-off altogether: their users run on this loop (``etcd_users.features.engine``), and ``deliver`` carries their
results back in batches. One bridge per process, made lazily after Locust has forked (``--processes``), never at import.

A greenlet's request is timed here, on the loop thread: ``Bridge._start_unary`` takes the start, ``_on_unary_done``
the end (the call's status, at grpc's done callback), so the hand-off between the threads is never part of a response
time. The end is returned too, so that a rate-driven user's intended-time latency ends on the same clock at the same
moment. The ready workloads' requests are timed the same way by their coroutines (``features/engine/client.py``).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import collections
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gevent.lock
import grpc
from gevent import monkey
from gevent.hub import Waiter, get_hub

from etcd_users.transport import native

native.import_grpc()

_start_native_thread = monkey.get_original("_thread", "start_new_thread")
_native_thread_id = monkey.get_original("_thread", "get_native_id")
_allocate_native_lock = monkey.get_original("_thread", "allocate_lock")

# (result, error, seconds from the call's start to its status, time.perf_counter() at its status)
CallOutcome = tuple[Any, BaseException | None, float, float]


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
        self.native_id: int | None = None
        self._stopped = _allocate_native_lock()
        self._stopped.acquire()
        started = _allocate_native_lock()
        started.acquire()
        _start_native_thread(self._run_loop, (started,))
        started.acquire()  # the loop is up within microseconds; nothing of the network is awaited here

    def _run_loop(self, started) -> None:
        native.register_native_thread("etcd-loop")
        self.native_id = _native_thread_id()  # the client's CPU reads this thread's waits for a CPU
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

    @property
    def closed(self) -> bool:
        return self._closed

    # gevent side

    def call(self, function: Callable[..., Awaitable], *args, **kwargs) -> CallOutcome:
        """Await ``function(*args, **kwargs)`` on the loop; return (result, error, seconds it took there, its end).

        ``function`` is called on the loop thread: grpc.aio binds a call to the loop it is made on.
        """
        return self._submit(self._start_task, function, args, kwargs)

    def unary(self, method: grpc.aio.UnaryUnaryMultiCallable, request, **kwargs) -> CallOutcome:
        """Make the unary call ``method(request, **kwargs)`` on the loop; return (response, error, seconds, end).

        The seconds run from the call's start to its status. What ``call`` does with a task per request, this does
        with grpc's own done callback.
        """
        return self._submit(self._start_unary, method, (request,), kwargs)

    def _submit(self, start: Callable[..., None], function: Callable, args: tuple, kwargs: dict) -> CallOutcome:
        if self._closed:
            raise RuntimeError("the etcd transport is closed")
        waiter = Waiter(self._hub)
        self._submissions.append((start, function, args, kwargs, waiter))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon_threadsafe(self._drain_submissions)
        return waiter.get()

    def run(self, function: Callable[..., Awaitable], *args, **kwargs) -> Any:
        """Await ``function(*args, **kwargs)`` on the loop and return its result, raising its error."""
        result, error, _, _ = self.call(function, *args, **kwargs)
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
            function, argument = completions.popleft()
            function(argument)

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
        while submissions:
            start, function, args, kwargs, waiter = submissions.popleft()
            start(waiter, function, args, kwargs)

    def _start_task(self, waiter: Waiter, function: Callable[..., Awaitable], args: tuple, kwargs: dict) -> None:
        self._loop.create_task(self._timed(waiter, function, args, kwargs))

    async def _timed(self, waiter: Waiter, function: Callable[..., Awaitable], args: tuple, kwargs: dict) -> None:
        started = time.perf_counter()
        try:
            result, error = await function(*args, **kwargs), None
        except BaseException as failure:  # handed to the waiting greenlet, which decides what it means
            result, error = None, failure
        ended = time.perf_counter()
        self._complete(waiter, (result, error, ended - started, ended))

    def _start_unary(self, waiter: Waiter, method: Callable, args: tuple, kwargs: dict) -> None:
        started = time.perf_counter()
        try:
            call = method(*args, **kwargs)
        except BaseException as error:
            ended = time.perf_counter()
            self._complete(waiter, (None, error, ended - started, ended))
            return
        call.add_done_callback(functools.partial(self._on_unary_done, waiter, started))

    def _on_unary_done(self, waiter: Waiter, started: float, call: grpc.aio.UnaryUnaryCall) -> None:
        # called as grpc records the status, before its task has the response: take it on the loop's next turn
        ended = time.perf_counter()
        self._loop.call_soon(self._finish_unary, waiter, call, ended - started, ended)

    def _finish_unary(self, waiter: Waiter, call: grpc.aio.UnaryUnaryCall, seconds: float, ended: float) -> None:
        awaiting = call.__await__()
        try:
            awaiting.send(None)
        except StopIteration as finished:
            outcome = (finished.value, None, seconds, ended)
        except BaseException as error:
            outcome = (None, error, seconds, ended)
        else:  # not finished after all (a call cancelled locally): wait for it
            awaiting.close()
            self._loop.create_task(self._finish_later(waiter, call, seconds, ended))
            return
        self._complete(waiter, outcome)

    async def _finish_later(self, waiter: Waiter, call: grpc.aio.UnaryUnaryCall, seconds: float, ended: float) -> None:
        try:
            outcome = (await call, None, seconds, ended)
        except BaseException as error:
            outcome = (None, error, seconds, ended)
        self._complete(waiter, outcome)

    def _complete(self, waiter: Waiter, outcome: CallOutcome) -> None:
        self.deliver(waiter.switch, outcome)

    def deliver(self, function: Callable[[Any], None], argument: Any) -> None:
        """Call ``function(argument)`` on the gevent thread, in its hub (where nothing may block), in the order of the
        calls: results and completions alike, with one wake-up for all that wait."""
        self._completions.append((function, argument))
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


def loop_thread_id() -> int | None:
    """The operating system's id of this process's loop thread; None before its bridge is made."""
    made = _bridge
    return made.native_id if made is not None else None


def close_bridge(cleanup: Callable[[], Awaitable] | None = None) -> None:
    global _bridge
    if _bridge is not None:
        _bridge.close(cleanup)
        _bridge = None
