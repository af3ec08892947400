"""Locust User classes that drive etcd's v3 gRPC API.

Subclass ``EtcdUser`` for a custom workload (``self.etcd`` offers put, range, delete and txn), or run a ready
one: ``locust -f locustfile.py EtcdPutUser``.
"""

from locust import User, constant, task
from locust.user.users import LOCUST_STATE_RUNNING

import time
from collections.abc import Callable

import gevent

from etcd_users.client import EtcdClient


class EtcdUser(User):
    """A user with an instrumented etcd client as ``self.etcd``; connections are shared by the process."""

    abstract = True
    wait_time = constant(0)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = EtcdClient(environment)

    def repeat(self, operation: Callable[[], object]) -> None:
        """Run ``operation`` until the user is stopped: back to back, or at ``--etcd-user-rate`` per second.

        One long-running task per user spares Locust's scheduling between requests. In the rate-driven mode the
        schedule does not slip when a response is late: the next request goes out at once to catch up, and its
        latency is also measured from when it should have been sent (coordinated omission).
        """
        rate = self.etcd.session.settings.user_rate
        if rate <= 0:
            while self._state == LOCUST_STATE_RUNNING:
                operation()
            return
        interval = 1.0 / rate
        due = time.perf_counter()
        while self._state == LOCUST_STATE_RUNNING:
            delay = due - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            self.etcd.intended_start = due
            operation()
            due += interval


class EtcdPutUser(EtcdUser):
    """Writes ``--etcd-val-size`` values to keys of the key space (like ``benchmark put``)."""

    @task
    def put(self) -> None:
        keys, put = self.etcd.keys, self.etcd.put
        self.repeat(lambda: put(keys.next_key(), keys.value))


class _RangeUser(EtcdUser):
    abstract = True
    serializable: bool | None = None  # None: --etcd-consistency decides

    def on_start(self) -> None:
        self.etcd.session.ensure_key_space()

    @task
    def range(self) -> None:
        keys, get, serializable = self.etcd.keys, self.etcd.range, self.serializable
        self.repeat(lambda: get(keys.next_key(), serializable=serializable))


class EtcdRangeUser(_RangeUser):
    """Reads single keys of the key space with the ``--etcd-consistency`` of the options (like ``benchmark range``)."""


class LinearizableRangeUser(_RangeUser):
    """Linearizable reads (``range/linearizable``): confirmed with the leader, always current."""

    serializable = False


class SerializableRangeUser(_RangeUser):
    """Serializable reads (``range/serializable``): served from the member's local state, possibly stale."""

    serializable = True
