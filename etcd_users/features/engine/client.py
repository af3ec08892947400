"""A ready workload's requests as coroutines on the loop thread: what ``EtcdClient`` does for a greenlet, without a
greenlet.

Each call chooses its connection, sends the request's bytes (``transport.wire``), times the RPC on the loop thread
as the bridge does for a greenlet (from the call's start to its status), counts it on its connection for the pool's
watchdog, retries once with a new token when etcd says the token expired, and adds one result to the process's batch
(``engine.results``): the same request names, response lengths, etcd's labels and intended-time latencies as
``EtcdClient``. The audit's notes are taken right after the answer (``audit.notes``). After a leader-lost label the
user pauses as a greenlet would, so that a dead channel does not spin.

The keys come from the run's key space, under ``--etcd-prefix`` by construction; only ``EtcdClient``, which takes the
keys of a workload of one's own, checks them against the prefix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from operator import attrgetter

from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit_trail.notes import ClientNotes
from etcd_users.features.engine.results import BATCH_MAX, LoopResults
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.session import Session
from etcd_users.transport.errors import (
    INVALID_TOKEN_LABEL,
    LEADER_LOST_LABELS,
    SLOW_MEMBER_LABELS,
    EndpointError,
    error_label,
)
from etcd_users.transport.native import native_lock
from etcd_users.transport.pool import Connection
from etcd_users.transport.wire import KeyRequests, parse_delete, parse_range, parse_txn, put_revision
from etcd_users.workload_model.keys import next_page_key

OUTAGE_PAUSE = 0.05  # as EtcdClient's: a dead channel fails at once, and a user must not spin on it

PUT = attrgetter("raw_kv.Put")
RANGE = attrgetter("raw_kv.Range")
DELETE = attrgetter("raw_kv.DeleteRange")
TXN = attrgetter("raw_kv.Txn")


class LoopClient:
    """One user's calls on the loop thread. Made on the gevent thread; used only on the loop thread after."""

    def __init__(self, session: Session, results: LoopResults, notes: ClientNotes | None, watchers: ProcessWatchers):
        settings = session.settings
        self.settings = settings
        self.keys = session.keys
        self.pool = session.pool
        self.requests = KeyRequests(settings.key_size, session.keys.value)
        self._timeout = settings.timeout
        self._auth = bool(settings.credentials.user)
        self.results = results
        self._notes = notes
        self._watchers = watchers
        # when the request due now should have been sent (time.perf_counter()), set by a rate-driven loop
        self.intended_start: float | None = None
        # The user's stop (``stop``, on the gevent thread) and this user's calls (on the loop thread) meet under this
        # lock: once ``stopping`` is set, no call goes out, and a call on the wire then is answered unreported
        # (``in_call``: sent, and its answer not yet taken). A call on the wire is let finish rather than cancelled:
        # etcd 3.5.0-3.5.4 panic on a read-only txn cancelled by its client (etcd issue #14110).
        self._stop_lock = native_lock()
        self.stopping = False
        self.in_call = False
        self.acknowledged = 0.0  # time.perf_counter() at the last call's status
        # time.perf_counter() when the call on the wire got its status (grpc's done callback), until this coroutine
        # reads it; a batch taken in between holds back the results that ended after it (``LoopResults._take_now``)
        self.status_at = 0.0
        self._call = None  # the call on the wire, whose status is stamped
        self.failure = ""  # the error label of the last call that failed
        # what a request listener raised for this user's request (StopUser, RescheduleTask...), taken to its greenlet
        self.deliver: Callable[[BaseException], None] = _nobody

    def _on_status(self, _call) -> None:
        """grpc's done callback: the call's status is in. Called a turn of the loop before this user's coroutine gets
        the answer, and before the other coroutines answered in the same turn have run: the end of the call's time
        is taken here, so that the time this client spends on other users' answers is not counted as etcd's."""
        if _call is self._call:  # a status that comes after its coroutine gave up waiting stamps nothing
            self.status_at = time.perf_counter()

    def stop(self) -> bool:
        """The user stops (gevent thread): nothing more is sent. True when a call was on the wire: its answer will not
        be reported."""
        with self._stop_lock:
            self.stopping = True
            return self.in_call

    # -- the calls --

    async def connection(self) -> Connection:
        pool = self.pool
        return pool.connection_on_loop() or await pool.elected_connection()

    async def unary(self, connection: Connection, method: attrgetter, request: bytes):
        """One call, unreported: (answer's bytes or None, error or None, seconds, its end). After the user's stop
        nothing is sent, and an answer that comes after it is not returned: both end the user's coroutine."""
        with self._stop_lock:
            if self.stopping:
                raise asyncio.CancelledError
            self.in_call = True
        token = connection.call_started()
        started = time.perf_counter()
        try:
            call = self._call = method(connection)(request, timeout=self._timeout, metadata=connection.metadata)
            call.add_done_callback(self._on_status)
            answer = await call
            error = None
        except asyncio.CancelledError as cancelled:  # the user's end, or the pool closed the call's channel
            answer, error = None, cancelled
        except Exception as failure:  # counted under etcd's label, never raised into the loop
            answer, error = None, failure
        ended = self.status_at or time.perf_counter()
        self.status_at, self._call = 0.0, None  # read: the result of this call is added before this coroutine awaits
        with self._stop_lock:
            self.in_call = False
            stopped = self.stopping
        if stopped:  # answered after the user's stop: not reported, as a stopped greenlet's call is not
            connection.call_ended(token, error is None, 0.0)
            raise asyncio.CancelledError
        # counted out; a call the pool abandoned is reported as EtcdClient's are (transport.errors.call_error)
        error = connection.call_finished(token, error, ended - started, ended, self._timeout)
        return answer, error, ended - started, ended

    async def call(self, method: attrgetter, request: bytes, name: str, connection: Connection | None = None):
        """One call, reported under ``name``: the answer's bytes, or None when it failed."""
        if connection is None:
            connection = await self.connection()
        answer, error, seconds, ended = await self.unary(connection, method, request)
        if error is not None and self._auth and error_label(error) == INVALID_TOKEN_LABEL and not self.stopping:
            # tokens expire when unused: get a new one and retry once, timed afresh
            try:
                await self.pool.authenticate(connection)
            except EndpointError:
                pass  # counted under the original label; the next call tries again
            else:
                answer, error, seconds, ended = await self.unary(connection, method, request)
        return await self._reported(name, answer, error, seconds, ended)

    async def _reported(self, name: str, answer: bytes | None, error, seconds: float, ended: float) -> bytes | None:
        if self.report(name, len(answer) if error is None else 0, error, seconds, ended):
            return answer
        if self.failure in LEADER_LOST_LABELS:
            await asyncio.sleep(OUTAGE_PAUSE)
        return None

    def report(self, name: str, length: int, error: BaseException | str | None, seconds: float, ended: float) -> bool:
        """Add one result; True for a success. ``error`` is the call's error, or etcd's label of it."""
        self.acknowledged = ended
        intended = self.intended_start
        if intended is not None:  # once: the schedule moves on
            self.intended_start = None
            intended = ended - intended
        results = self.results
        pool = self.pool
        if error is None:
            if pool.outage_started is not None:
                pool.end_outage(ended)
            label = None
        else:
            self.failure = label = error if isinstance(error, str) else error_label(error)
            if label in LEADER_LOST_LABELS or label in SLOW_MEMBER_LABELS:
                pool.rediscover()
            if label in LEADER_LOST_LABELS:
                pool.begin_outage(label)
        items = results.items
        items.append((name, seconds, ended, length, label, intended, self))
        if len(items) >= BATCH_MAX:
            results.hand_over()
        return label is None

    # -- the operations of the ready workloads --

    async def put(self, key: bytes, name: str = "put") -> bytes | None:
        answer = await self.call(PUT, self.requests.put(key), name)
        if answer is not None:
            notes, watching = self._notes, self._watchers.latencies
            if notes is not None or watching is not None:
                revision = put_revision(answer)
                if notes is not None:
                    notes.put(key, revision, self.acknowledged)
                if watching is not None:  # this process's watchers time the events of this put from its answer
                    self._watchers.local_writes = True
                    self.results.watch_acks.append((revision, self.acknowledged))
        return answer

    async def read(self, key: bytes, serializable: bool, name: str) -> bytes | None:
        """A range of ``key`` alone."""
        notes = self._notes
        if notes is None:
            return await self.call(RANGE, self.requests.read(key, serializable), name)
        connection = await self.connection()
        sent = notes.read_sent(key, serializable, b"")
        answer = await self.call(RANGE, self.requests.read(key, serializable), name, connection)
        if answer is not None:  # judged after the call's timing
            notes.read_answered(sent, parse_range(answer), key, serializable, connection.endpoint.target, name)
        return answer

    async def range(self, request: rpc_pb2.RangeRequest, name: str) -> bytes | None:
        """A range of ``request``'s shape (several keys, a limit, keys or a count only)."""
        notes = self._notes
        if notes is None:
            return await self.call(RANGE, request.SerializeToString(), name)
        connection = await self.connection()
        sent = notes.read_sent(request.key, request.serializable, request.range_end)
        answer = await self.call(RANGE, request.SerializeToString(), name, connection)
        if answer is not None:
            response = parse_range(answer)
            notes.read_answered(sent, response, request.key, request.serializable, connection.endpoint.target, name)
        return answer

    async def paged_list(self, request: rpc_pb2.RangeRequest, page_name: str, list_name: str) -> None:
        """The whole key space in pages (``EtcdClient.paged_list``): each page a ``page_name`` request, the list one
        ``list_name`` request from the first page's send to the last page's answer."""
        intended, self.intended_start = self.intended_start, None  # the list is what the schedule sent, not a page
        started = time.perf_counter()
        length, first_revision = 0, 0
        while True:
            answer = await self.call(RANGE, request.SerializeToString(), page_name)
            if answer is None:
                break
            length += len(answer)
            page = parse_range(answer)
            if not page.more or not page.kvs:
                break
            first_revision = first_revision or page.header.revision
            request.key = next_page_key(page.kvs[-1].key)
            request.revision = first_revision
        self.intended_start = intended
        failed = answer is None
        self.report(
            list_name,
            0 if failed else length,
            self.failure if failed else None,
            self.acknowledged - started,
            self.acknowledged,
        )

    async def delete(self, key: bytes, name: str = "delete") -> bytes | None:
        """A delete of ``key`` alone; with the audit, one that may have been applied though it failed is noted so."""
        notes = self._notes
        if notes is None:
            return await self.call(DELETE, self.requests.delete(key), name)
        index = notes.delete_sent(key)  # one cut short (the user stopped while it waited) stays in flight: doubtful
        answer = await self.call(DELETE, self.requests.delete(key), name)
        revision = parse_delete(answer).header.revision if answer is not None else None
        notes.delete_answered(index, key, revision, self.acknowledged)
        return answer

    async def read_modify_write(self, key: bytes, serializable: bool, name: str) -> bytes | None:
        """YCSB's read-modify-write: a range of ``key`` then a put of it, one ``name`` request from the range's send
        to the put's answer (``EtcdClient._read_modify_write``); a failure of either is the operation's."""
        _, error, seconds, ended = await self.unary(
            await self.connection(), RANGE, self.requests.read(key, serializable)
        )
        if error is not None:
            return await self._reported(name, None, error, seconds, ended)
        sent = ended - seconds
        answer, error, _, ended = await self.unary(await self.connection(), PUT, self.requests.put(key))
        if answer is not None and self._notes is not None:
            self._notes.put(key, put_revision(answer), ended)
        return await self._reported(name, answer, error, ended - sent, ended)

    async def txn(self, request: rpc_pb2.TxnRequest, name: str) -> bytes | None:
        answer = await self.call(TXN, request.SerializeToString(), name)
        if self._notes is not None:
            self._notes.txn(request, parse_txn(answer) if answer is not None else None, self.acknowledged)
        return answer


def _nobody(exception: BaseException) -> None:
    """Before a user's loop runs there is no greenlet to take a listener's exception to."""
