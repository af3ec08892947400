"""``EtcdUser``: the base of every workload, a Locust ``User`` with an instrumented etcd client as ``self.etcd``.

Importing it installs the ``--etcd-*`` options and the run's life cycle (``etcd_users.core.plugin``) into Locust, once,
before Locust creates its runner: a feature's own user imports it from here (``etcd_users.users`` re-exports it).
"""

from locust import User, constant, events
from locust.user.users import LOCUST_STATE_RUNNING

import time
from collections.abc import Callable

import gevent

from etcd_users.core import plugin
from etcd_users.user_base.client import EtcdClient
from etcd_users.workload_model.arrivals import due_times

# the --etcd-* options and the run's life cycle, once, before Locust creates its runner
plugin.install(events)


class EtcdUser(User):
    """The base of every workload: a Locust ``User`` with an instrumented etcd client as ``self.etcd``.

    Subclass it and write tasks as for any Locust user; ``self.etcd`` (an ``EtcdClient``) makes the calls, each
    reported as one Locust request, and ``self.repeat(operation)`` runs one operation back to back or at
    ``--etcd-user-rate``. The connections, the key space and the settings are shared by the users of a process.
    ``wait_time`` is ``constant(0)``: set Locust's own ``wait_time`` for think time between tasks.

    The ready workloads prepare inside their task, not in ``on_start``: a process that cannot reach etcd stops
    its users there with one logged line, where Locust would print a traceback per user from ``on_start``.
    """

    abstract = True
    wait_time = constant(0)
    # reads keys of the key space: the master (or single process) writes it before the run
    # (etcd_users.key_space_fill)
    reads_key_space = False
    follows_user_rate = True  # sends at --etcd-user-rate through repeat (etcd_users.latency.user_rate)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = EtcdClient(environment)

    @classmethod
    def options_error(cls, settings) -> str | None:
        """What this workload lacks among the run's settings, in one line, or None when it can run.

        Called with the run's settings before any user starts; a line returned refuses the run
        (``locust-etcd: error: LINE``, exit code 2). ``EtcdYcsbUser`` returns one when ``--etcd-ycsb`` is missing.
        """
        return None

    def repeat(self, operation: Callable[[], object]) -> None:
        """Run ``operation`` (a function without arguments) until the user is stopped: back to back, or at
        ``--etcd-user-rate`` per second (``--etcd-arrival`` fixed or Poisson).

        One long-running task per user spares Locust's scheduling between requests. In the rate-driven mode the
        schedule does not slip when a response is late: the next request goes out at once to catch up, and its
        latency is also measured from when it should have been sent (coordinated omission).
        """
        settings = self.etcd.session.settings
        if settings.user_rate <= 0:
            while self._state == LOCUST_STATE_RUNNING:
                operation()
            return
        for due in due_times(settings.arrival, settings.user_rate, time.perf_counter()):  # --etcd-arrival
            if self._state != LOCUST_STATE_RUNNING:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            self.etcd.intended_start = due
            operation()
