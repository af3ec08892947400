"""Locust User classes that drive etcd's v3 gRPC API.

Subclass ``EtcdUser`` for a custom workload (``self.etcd`` offers put, range, delete and txn), or run a ready
one: ``locust -f locustfile.py EtcdPutUser``.

The ready workloads are here, each defined once (``etcd_users.workload_model.workloads``) and run on the loop thread
or on its greenlet (``etcd_users.features.engine``); the base user is ``etcd_users.user_base.user``'s, the watch,
lease and Kubernetes users their features' (``users`` of each one's ``FEATURE``). Every class is importable from here,
as locustfiles do.
"""

from locust import task
from locust.exception import StopUser

import logging

from etcd_users.audit_trail.notes import ClientNotes
from etcd_users.audit_trail.record import AuditState
from etcd_users.core.run_context import run_context
from etcd_users.features.engine.choice import LOOP, ready
from etcd_users.features.engine.client import LoopClient
from etcd_users.features.engine.results import loop_results
from etcd_users.features.engine.user_loop import LoopUser
from etcd_users.features.kubernetes.users import EtcdKubernetesNodeUser, EtcdKubernetesUser
from etcd_users.features.watchers.users import EtcdWatcherUser, EtcdWatchUser
from etcd_users.features.workload.users import EtcdLeaseUser
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.user_base.blocking import BlockingClient, run_now
from etcd_users.user_base.user import EtcdUser
from etcd_users.workload_model import workloads
from etcd_users.workload_model.workloads import Workload

logger = logging.getLogger(__name__)

YCSB_MISSING = "--etcd-ycsb: EtcdYcsbUser needs a workload; give one of A, B, C, D, E, F (e.g. --etcd-ycsb A)"

__all__ = [
    "EtcdDeleteUser",
    "EtcdKubernetesNodeUser",
    "EtcdKubernetesUser",
    "EtcdLeaseUser",
    "EtcdMixedUser",
    "EtcdPutUser",
    "EtcdRangeUser",
    "EtcdTxnMixedUser",
    "EtcdTxnPutUser",
    "EtcdUser",
    "EtcdWatchUser",
    "EtcdWatcherUser",
    "EtcdYcsbUser",
    "LinearizableRangeUser",
    "SerializableRangeUser",
]


class _ReadyUser(EtcdUser):
    """The ready workloads' base: each runs its workload (``etcd_users.workload_model.workloads``, defined once) on
    the loop thread or on its greenlet (``_run_ready``)."""

    abstract = True

    def _run_ready(self, workload: Workload) -> None:
        """A ready workload's requests until the user stops: its operation as a coroutine on the loop thread
        (``--etcd-engine loop``, the default), else made at once on this greenlet by ``repeat``."""
        etcd = self.etcd
        session = etcd.session
        if session.settings.engine != LOOP:
            operation = workload(BlockingClient(etcd))
            self.repeat(lambda: run_now(operation()))
            return
        context = run_context(self.environment)
        record = context.get(AuditState).record
        notes = ClientNotes(record) if record is not None else None
        client = LoopClient(session, loop_results(context), notes, context.get(ProcessWatchers))
        LoopUser(self, client, workload).run(session.bridge)


class EtcdPutUser(_ReadyUser):
    """Writes ``--etcd-val-size`` values to keys of the key space (like ``benchmark put``)."""

    @task
    @ready
    def put(self) -> None:
        self._run_ready(workloads.put)


class _RangeUser(_ReadyUser):
    abstract = True
    reads_key_space = True
    serializable: bool | None = None  # None: --etcd-consistency decides

    @task
    @ready
    def range(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(workloads.ranges(self.serializable))


class EtcdRangeUser(_RangeUser):
    """Reads single keys of the key space with the ``--etcd-consistency`` of the options (like ``benchmark range``)."""


class LinearizableRangeUser(_RangeUser):
    """Linearizable reads (``range/linearizable``): confirmed with the leader, always current."""

    serializable = False


class SerializableRangeUser(_RangeUser):
    """Serializable reads (``range/serializable``): served from the member's local state, possibly stale."""

    serializable = True


class EtcdTxnPutUser(_ReadyUser):
    """Transactions of ``--etcd-txn-ops`` puts (``txn-put``, like ``benchmark txn-put``)."""

    @task
    @ready
    def txn_put(self) -> None:
        self._run_ready(workloads.txn_put)


class EtcdTxnMixedUser(_ReadyUser):
    """Read or write transactions at ``--etcd-rw-ratio`` reads per write (``txn-mixed-read``/``-write``)."""

    reads_key_space = True

    @task
    @ready
    def txn_mixed(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(workloads.txn_mixed)


class EtcdDeleteUser(_ReadyUser):
    """Writes a key and deletes it again (``put`` then ``delete``), so every delete removes a key."""

    @task
    @ready
    def put_then_delete(self) -> None:
        self._run_ready(workloads.delete)


class EtcdMixedUser(_ReadyUser):
    """Operations drawn by the weights of ``--etcd-mix`` (default put 45, range 30, delete 25)."""

    reads_key_space = True

    @task
    @ready
    def mixed(self) -> None:
        self.etcd.session.ensure_key_space()
        self._run_ready(workloads.mixed)


class EtcdYcsbUser(_ReadyUser):
    """YCSB's core workload ``--etcd-ycsb A``…``F``: reads, updates, inserts, scans and read-modify-writes in the
    workload's proportions (``ycsb/read``, ``ycsb/update``, …), after the key space is loaded (YCSB's load phase)."""

    reads_key_space = True

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
        self._run_ready(workloads.ycsb_workload)
