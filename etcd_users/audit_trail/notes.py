"""What a client notes of each answer for the audit: the writes acknowledged to it (``Ledger``, ``AcknowledgedWrites``)
and its reads judged against them (``ReadChecks``). Neither Locust nor gevent.

Both ways of running users note the same things through this one class: a greenlet's ``EtcdClient`` on the gevent
thread, a ready workload's ``etcd_users.features.engine.client.LoopClient`` on the loop thread, each right after a
response and outside its timing. A read is judged against what was acknowledged when it was sent, so the notes are taken
at once, never in a later batch. A run that mixes both kinds of users in one process notes from both threads: each
note is taken whole under the record's lock (a lock of the operating system's threads, uncontended otherwise).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit_trail.record import RunRecord


class ClientNotes:
    """The audit's record of one run (``RunRecord``), as a client writes into it."""

    def __init__(self, record: RunRecord) -> None:
        self.ledger = record.ledger
        self.reads = record.reads
        self.writes = record.reads.writes
        self._lock = record.lock

    def put(self, key: bytes, revision: int, at: float) -> None:
        """A put of ``key`` acknowledged at ``revision``, its answer at ``at`` (``time.perf_counter()``)."""
        with self._lock:
            self.ledger.put(key, revision)
            self.writes.acknowledged(revision, at)

    def range_deleted(self) -> None:
        """A delete of a range sent: which keys it removed is not kept."""
        with self._lock:
            self.ledger.untracked_delete()

    def delete_sent(self, key: bytes) -> int:
        """Before a delete of one key is sent; returns the index for ``delete_answered``."""
        with self._lock:
            return self.ledger.delete_sent(key)

    def delete_answered(self, index: int, key: bytes, revision: int | None, at: float) -> None:
        """A delete ``delete_sent`` returned ``index`` for answered at ``revision``, or failed (None): cut short, it
        may still have been applied."""
        with self._lock:
            self.ledger.delete_answered(index, key, revision)
            if revision is not None:
                self.writes.acknowledged(revision, at)

    def txn(self, request: rpc_pb2.TxnRequest, response: rpc_pb2.TxnResponse | None, at: float) -> None:
        """A transaction answered (``response``) or failed (None)."""
        with self._lock:
            if response is not None:
                ops = request.success if response.succeeded else request.failure
                if _record_ops(self.ledger, ops, response.header.revision):
                    self.writes.acknowledged(response.header.revision, at)
            elif _deletes(request):
                self.ledger.untracked_delete()  # a failed transaction's deletes may have been applied all the same

    def read_sent(self, key: bytes, serializable: bool, range_end: bytes) -> tuple[float, int, int]:
        """Before a read is sent: when, the newest revision acknowledged then, and its single key's latest write."""
        with self._lock:
            mark = 0 if serializable or range_end else self.ledger.mark(key)
            return time.perf_counter(), self.writes.newest, mark

    def read_answered(
        self,
        sent: tuple[float, int, int],
        response: rpc_pb2.RangeResponse,
        key: bytes,
        serializable: bool,
        member: str,
        name: str,
    ) -> None:
        """A read ``read_sent`` returned ``sent`` for, answered: a serializable one's staleness measured, a
        linearizable one judged."""
        sent_at, newest, mark = sent
        with self._lock:
            if serializable:
                self.reads.serializable(sent_at, newest, response.header.revision, member)
            else:
                self.reads.linearizable(sent_at, newest, mark, response, key, member, name)


def _record_ops(ledger, ops: Iterable[rpc_pb2.RequestOp], revision: int) -> bool:
    """The writes of a transaction's branch that ran, all acknowledged at its revision; False when it wrote nothing."""
    wrote = False
    for op in ops:
        kind = op.WhichOneof("request")
        wrote = wrote or kind != "request_range"
        if kind == "request_put":
            ledger.put(op.request_put.key, revision)
        elif kind == "request_delete_range":
            delete = op.request_delete_range
            if delete.range_end:
                ledger.untracked_delete()
            else:
                ledger.delete(delete.key, revision)
        elif kind == "request_txn":
            ledger.untracked_delete()  # which branch of a nested transaction ran is in its own response: not kept
    return wrote


def _deletes(request: rpc_pb2.TxnRequest) -> bool:
    return any(
        op.WhichOneof("request") in ("request_delete_range", "request_txn")
        for op in (*request.success, *request.failure)
    )
