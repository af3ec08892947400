"""Locust User classes that drive etcd's v3 gRPC API.

Subclass ``EtcdUser`` for a custom workload (``self.etcd`` offers put, range, delete and txn), or run a ready
one: ``locust -f locustfile.py EtcdPutUser``.
"""

from locust import User, constant, events, task
from locust.exception import StopUser
from locust.user.users import LOCUST_STATE_RUNNING

import bisect
import itertools
import logging
import random
import time
from collections.abc import Callable

import gevent

from etcd_users.core import plugin
from etcd_users.core.run_context import run_context
from etcd_users.features.audit.notes import ClientNotes
from etcd_users.features.audit.record import AuditState
from etcd_users.features.engine import workloads
from etcd_users.features.engine.choice import LOOP, ready
from etcd_users.features.engine.client import LoopClient
from etcd_users.features.engine.results import loop_results
from etcd_users.features.engine.user_loop import LoopUser
from etcd_users.features.engine.workloads import Workload
from etcd_users.features.kubernetes.client import KubernetesClient
from etcd_users.features.watchers.client import WatcherClient
from etcd_users.features.watchers.state import ProcessWatchers
from etcd_users.features.workload.client import EtcdClient
from etcd_users.features.workload.ycsb_client import YcsbClient
from etcd_users.workload_model.arrivals import first_arrival, intervals

logger = logging.getLogger(__name__)

# at the stop, how long the watchers may take to receive the events of the last puts before they are judged
WATCH_CATCH_UP_SECONDS = 10.0
YCSB_MISSING = "--etcd-ycsb: EtcdYcsbUser needs a workload; give one of A, B, C, D, E, F (e.g. --etcd-ycsb A)"

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
    follows_user_rate = True  # sends at --etcd-user-rate through repeat (etcd_users.features.rate_held.hooks)

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

    def _run_ready(self, operation: Callable[[], Callable[[], object]], workload: Workload) -> None:
        """A ready workload's requests until the user stops: ``workload``'s operation as a coroutine on the loop
        thread (``--etcd-engine loop``, the default), else ``repeat(operation())`` on this greenlet."""
        etcd = self.etcd
        session = etcd.session
        if session.settings.engine != LOOP:
            self.repeat(operation())
            return
        context = run_context(self.environment)
        record = context.get(AuditState).record
        notes = ClientNotes(record) if record is not None else None
        client = LoopClient(session, loop_results(context), notes, context.get(ProcessWatchers))
        LoopUser(self, client, workload).run(session.bridge)

    def repeat(self, operation: Callable[[], object]) -> None:
        """Run ``operation`` (a function without arguments) until the user is stopped: back to back, or at
        ``--etcd-user-rate`` per second (``--etcd-arrival`` fixed or Poisson).

        One long-running task per user spares Locust's scheduling between requests. In the rate-driven mode the
        schedule does not slip when a response is late: the next request goes out at once to catch up, and its
        latency is also measured from when it should have been sent (coordinated omission).
        """
        settings = self.etcd.session.settings
        rate = settings.user_rate
        if rate <= 0:
            while self._state == LOCUST_STATE_RUNNING:
                operation()
            return
        generator = random.Random()
        interval = intervals(settings.arrival, rate, generator)  # --etcd-arrival: fixed or Poisson
        due = time.perf_counter() + first_arrival(settings.arrival, rate, generator)
        while self._state == LOCUST_STATE_RUNNING:
            delay = due - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            self.etcd.intended_start = due
            operation()
            due += interval()


class EtcdPutUser(EtcdUser):
    """Writes ``--etcd-val-size`` values to keys of the key space (like ``benchmark put``)."""

    @task
    @ready
    def put(self) -> None:
        self._run_ready(self._put, workloads.put)

    def _put(self) -> Callable[[], object]:
        keys, put = self.etcd.keys, self.etcd.put
        next_key, value = keys.next_write_key, keys.value
        return lambda: put(next_key(), value)


class _RangeUser(EtcdUser):
    abstract = True
    reads_key_space = True
    serializable: bool | None = None  # None: --etcd-consistency decides

    @task
    @ready
    def range(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(lambda: self.etcd.ranges(self.serializable), workloads.ranges(self.serializable))


class EtcdRangeUser(_RangeUser):
    """Reads single keys of the key space with the ``--etcd-consistency`` of the options (like ``benchmark range``)."""


class LinearizableRangeUser(_RangeUser):
    """Linearizable reads (``range/linearizable``): confirmed with the leader, always current."""

    serializable = False


class SerializableRangeUser(_RangeUser):
    """Serializable reads (``range/serializable``): served from the member's local state, possibly stale."""

    serializable = True


class EtcdTxnPutUser(EtcdUser):
    """Transactions of ``--etcd-txn-ops`` puts (``txn-put``, like ``benchmark txn-put``)."""

    @task
    @ready
    def txn_put(self) -> None:
        self._run_ready(lambda: self.etcd.txn_put, workloads.txn_put)


class EtcdTxnMixedUser(EtcdUser):
    """Read or write transactions at ``--etcd-rw-ratio`` reads per write (``txn-mixed-read``/``-write``)."""

    reads_key_space = True

    @task
    @ready
    def txn_mixed(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(lambda: self.etcd.txn_mixed, workloads.txn_mixed)


class EtcdDeleteUser(EtcdUser):
    """Writes a key and deletes it again (``put`` then ``delete``), so every delete removes a key."""

    @task
    @ready
    def put_then_delete(self) -> None:
        self._run_ready(self._put_then_delete, workloads.delete)

    def _put_then_delete(self) -> Callable[[], object]:
        keys, put, delete = self.etcd.keys, self.etcd.put, self.etcd.delete

        def put_then_delete() -> None:
            key = keys.next_write_key()
            put(key, keys.value)
            delete(key)

        return put_then_delete


class EtcdLeaseUser(EtcdUser):
    """Grants one lease (``lease-grant``), then keeps it alive in a loop on one stream (``lease-keepalive``)."""

    lease_ttl = 60
    lease_id: int | None = None

    @task
    def keep_alive(self) -> None:
        if self.lease_id is None:
            granted = self.etcd.lease_grant(self.lease_ttl)
            if granted is None:
                return  # the failure is counted; the next run of the task tries again
            self.lease_id = granted.ID
        lease_id, keep_alive = self.lease_id, self.etcd.lease_keep_alive
        self.repeat(lambda: keep_alive(lease_id))

    def on_stop(self) -> None:
        self.etcd.stop_streams()
        if self.lease_id is not None:
            self.etcd.lease_revoke(self.lease_id)


class EtcdWatchUser(EtcdUser):
    """Watches one key of its own with ``--etcd-watch-streams`` × ``--etcd-watchers-per-stream`` watchers and puts
    it in a loop: ``put`` rows, and one ``watch`` row per event received, timed from the put's acknowledgement."""

    @task
    def put_and_watch(self) -> None:
        keys = self.etcd.keys
        key, put_and_watch = keys.next_key(), self.etcd.put_and_watch
        self.repeat(lambda: put_and_watch(key, keys.value))

    def on_stop(self) -> None:
        self.etcd.stop_streams(catch_up=WATCH_CATCH_UP_SECONDS)


class EtcdWatcherUser(EtcdUser):
    """Watches the prefix (or ``--etcd-watch-keys`` keys) with ``--etcd-watch-streams`` × ``--etcd-watchers-per-stream``
    watchers and writes nothing: the writers are any other workload, in this run or another. One ``watch/event``
    row per event of a put of this process, timed from the put's acknowledgement; the events, their lag in revisions
    and the watchers etcd cancelled in the ``watchers:`` line."""

    follows_user_rate = False

    @task
    def watch(self) -> None:
        self.watchers = WatcherClient(self.etcd)
        self.watchers.run(lambda: self._state == LOCUST_STATE_RUNNING)

    def on_stop(self) -> None:
        watchers = getattr(self, "watchers", None)
        if watchers is not None:
            watchers.stop()


class EtcdMixedUser(EtcdUser):
    """Operations drawn by the weights of ``--etcd-mix`` (default put 45, range 30, delete 25)."""

    reads_key_space = True

    @task
    @ready
    def mixed(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(self._mixed, workloads.mixed)

    def _mixed(self) -> Callable[[], object]:
        etcd, keys = self.etcd, self.etcd.keys
        operations = {
            "put": lambda: etcd.put(keys.next_write_key(), keys.value),
            "range": etcd.ranges(),
            "range/linearizable": etcd.ranges(serializable=False),
            "range/serializable": etcd.ranges(serializable=True),
            "delete": lambda: etcd.delete(keys.next_key()),
            "txn-put": etcd.txn_put,
        }
        mix = etcd.session.settings.mix
        choices = [operations[name] for name, _ in mix]
        cumulative = list(itertools.accumulate(weight for _, weight in mix))
        draw = random.Random().random
        total = cumulative[-1]
        return lambda: choices[bisect.bisect(cumulative, draw() * total)]()


class EtcdYcsbUser(EtcdUser):
    """YCSB's core workload ``--etcd-ycsb A``…``F``: reads, updates, inserts, scans and read-modify-writes in the
    workload's proportions (``ycsb/read``, ``ycsb/update``, …), after the key space is loaded (YCSB's load phase)."""

    reads_key_space = True

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = YcsbClient(environment)

    @classmethod
    def options_error(cls, settings) -> str | None:
        return None if settings.ycsb is not None else YCSB_MISSING

    @task
    @ready
    def ycsb(self) -> None:
        if self.etcd.session.settings.ycsb is None:  # a web UI's run may change the options after the start
            logger.error("locust-etcd: error: %s", YCSB_MISSING)
            raise StopUser()
        self.etcd.session.ensure_key_space()
        self._run_ready(self.etcd.operation, workloads.ycsb_workload)


class EtcdKubernetesUser(EtcdUser):
    """kube-apiserver's traffic (etcd's client/v3/kubernetes and robustness "Kubernetes" mix): gets, paged lists,
    counts and a watch per resource, optimistic creates, updates and deletes of ``--etcd-k8s-objects`` under
    ``PREFIX RESOURCE/NAMESPACE/NAME`` (``k8s/…`` rows; a failed compare is the failure ``k8s: conflict``)."""

    k8s_prefill = ("objects",)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = KubernetesClient(environment)

    @task
    def kubernetes(self) -> None:
        self.repeat(self.etcd.operation)


class EtcdKubernetesNodeUser(EtcdUser):
    """Kubelets' heartbeats: each of ``--etcd-k8s-nodes`` nodes' Lease (namespace kube-node-lease) updated every
    ``--etcd-k8s-lease-period`` seconds (``k8s/lease-renew``), each renewal in a greenlet of its own when due. One
    such user per run (``fixed_count``) drives every node, whatever ``-u`` and the workers."""

    fixed_count = 1
    follows_user_rate = False  # its schedule is the lease period
    k8s_prefill = ("nodes",)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = KubernetesClient(environment)

    @task
    def heartbeats(self) -> None:
        self.etcd.heartbeats(lambda: self._state == LOCUST_STATE_RUNNING)
