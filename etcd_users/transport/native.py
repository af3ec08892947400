"""grpc.aio in a gevent-patched process: the native threads, locks and sockets its internals expect.

The bridge runs grpc.aio on a native thread (see ``transport.bridge``). gevent's monkey patching hands grpc's Cython
layer stand-ins that are wrong or slow there:

- ``threading.Thread`` becomes a greenlet: grpc.aio's completion-queue poller would block in C and freeze its thread;
- ``threading.RLock`` becomes a pure-Python lock over gevent's: grpc takes one three times on every call (its aio
  state lock when the call is made and when it is freed, its observability plugin lock), each a few Python calls;
- ``socket.socketpair`` makes gevent sockets: the poller's wake-up socket is read through gevent's Python ``recv``.

``import_grpc()`` imports grpc with native ones. It runs when the package is imported (in a Locust process Locust has
patched by then, and nothing has imported grpc yet) and again, if patching came later, when ``bridge`` is.
Without monkey patching it does nothing.
"""

import logging
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)
_imported = False


def import_grpc() -> None:
    """Import grpc and grpc.aio so that they use native threads, locks and sockets under gevent's patching."""
    global _imported
    if _imported or "gevent" not in sys.modules:
        return
    from gevent import monkey

    if not monkey.is_module_patched("threading"):
        return
    _imported = True
    native_rlock = monkey.get_original("threading", "_CRLock")
    if "grpc" in sys.modules:
        # locks made at grpc's import stay gevent's: slower, still correct
        logger.debug("grpc was imported before etcd_users: its aio state lock is gevent's")
    else:
        patched_rlock = threading._CRLock  # None under gevent: threading.RLock() then makes a Python lock
        threading._CRLock = native_rlock
        try:
            import grpc.aio  # noqa: F401
        finally:
            threading._CRLock = patched_rlock
    import grpc._observability
    from grpc._cython import cygrpc

    if not isinstance(grpc._observability._plugin_lock, native_rlock):
        grpc._observability._plugin_lock = native_rlock()
    cygrpc.threading = _NativeThreading(monkey)
    cygrpc.socket = _NativeSocketpair(monkey)


class _NativeThread:
    """What grpc's Cython layer gets for ``threading.Thread``: a real OS thread."""

    def __init__(self, monkey, target=None, name=None, args=(), kwargs=None, daemon=None) -> None:
        self.name = name
        self.daemon = daemon
        self._start_native_thread = monkey.get_original("_thread", "start_new_thread")
        self._target, self._args, self._kwargs = target, args, kwargs or {}
        self._finished = monkey.get_original("_thread", "allocate_lock")()
        self._finished.acquire()
        self._alive = False

    def start(self) -> None:
        self._alive = True
        self._start_native_thread(self._bootstrap, ())

    def _bootstrap(self) -> None:
        register_native_thread(self.name or "grpc")
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


class _NativeThreading:
    """The ``threading`` module as grpc's Cython layer should see it: ``Thread`` is a native thread."""

    def __init__(self, monkey) -> None:
        self._monkey = monkey

    def Thread(self, *args, **kwargs) -> _NativeThread:  # noqa: N802  (stands in for the class)
        return _NativeThread(self._monkey, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


class _NativeSocketpair:
    """The ``socket`` module as grpc's Cython layer should see it: ``socketpair`` makes native sockets."""

    def __init__(self, monkey) -> None:
        import _socket
        import socket

        self._socketpair = _socket.socketpair
        self._socket_class = monkey.get_original("socket", "socket")
        self._socket = socket

    def socketpair(self, *args):
        first, second = self._socketpair(*args)
        return self._socket_class(fileno=first.detach()), self._socket_class(fileno=second.detach())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)


def native_lock():
    """A lock of the operating system's threads: the gevent thread and the loop thread both take it (gevent's
    patched lock only orders the greenlets of one thread)."""
    import _thread

    if "gevent" in sys.modules:
        from gevent import monkey

        return monkey.get_original("_thread", "allocate_lock")()
    return _thread.allocate_lock()


def register_native_thread(name: str) -> None:
    """Call first thing in a native thread of a patched process: its entry in ``threading`` (what logging's
    ``threadName`` reads) is made now, named, and tells a forked child that it is gone. The entry ``threading`` would
    make itself on the thread's first log line (a dummy) fails gevent 25's check after a fork: every child process,
    an etcd member the tool restarts among them, would print an AssertionError's traceback."""
    entry = threading.current_thread()
    entry.name = name
    entry.is_alive = lambda: not entry._is_stopped  # stopped in a forked child, by threading's own after-fork hook
