"""Instrumented etcd calls: each one timed on the loop around the RPC itself and reported to Locust.

Request type ``etcd``; failures are reported under etcd's own error text or the gRPC status name, and never
raise into the user's task: a run that hits etcd errors keeps running and counts them.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import random
import time
from collections.abc import Callable, Iterable

import gevent
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit_trail.notes import ClientNotes
from etcd_users.audit_trail.record import AuditState
from etcd_users.core.run_context import run_context
from etcd_users.latency.store import INTENDED_CONTEXT_KEY
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.session import ProcessSession, Session
from etcd_users.transport.bridge import CallOutcome
from etcd_users.transport.errors import (
    INVALID_TOKEN_LABEL,
    LEADER_LOST_LABELS,
    SLOW_MEMBER_LABELS,
    EndpointError,
    error_label,
)
from etcd_users.transport.pool import Connection
from etcd_users.transport.streams import KeepAliveStream, WatchFanOut
from etcd_users.transport.watch_counts import WatchCounts
from etcd_users.user_base.blocking import BlockingClient, run_now
from etcd_users.workload_model import workloads
from etcd_users.workload_model.keys import KeySpace, next_page_key
from etcd_users.workload_model.requests import RANGE_NAMES, mixed_txn, puts

REQUEST_TYPE = "etcd"
_OUTAGE_PAUSE = 0.05


class KeyOutsidePrefixError(ValueError):
    """A write outside ``--etcd-prefix``: the tool never touches keys it was not given."""


class EtcdClient:
    """``self.etcd`` of an EtcdUser: put, range, delete, txn, leases and watches, each reported as one Locust request.

    Every call is one request of type ``etcd`` in Locust's statistics, under the name given (``name=``) or the
    operation's own (``put``, ``range/linearizable``, ``txn``, ...), timed around the RPC itself, and recorded in the
    exact latency histograms. Each method returns etcd's response message (the protobuf of ``etcd3.etcdrpc``), or
    None when the call failed: the failure is counted under etcd's error text (``etcdserver: too many requests``) or
    the gRPC status (``UNAVAILABLE``), and never raises into the task. Only a write outside ``--etcd-prefix`` raises,
    ``KeyOutsidePrefixError``, before anything is sent.

    The connections, the key space and the settings are the process's, shared by all its users (``session``); the
    client itself holds only this user's streams and its schedule.
    """

    def __init__(self, environment) -> None:
        self.environment = environment
        self._fire = environment.events.request.fire
        self._fire_watch_event = self.watch_reporter("watch/event")  # EtcdWatcherUser's events of this process's puts
        self._context = run_context(environment)
        self._session: Session | None = None
        # set by a rate-driven loop: when the request should have been sent (time.perf_counter())
        self.intended_start: float | None = None
        self._keep_alive: KeepAliveStream | None = None
        self._watch: WatchFanOut | None = None
        self._random = random.Random().random
        self._acknowledged = 0.0  # time.perf_counter() at the last call's status, on the loop thread
        self._failure = ""  # the error label of the last call that failed
        # the audit's record of the run (made at its start, before the users): each acknowledged write goes in after
        # its response, on this thread, outside the call's timing, and the reads are judged against them
        self._record = self._context.get(AuditState).record
        self._notes = ClientNotes(self._record) if self._record is not None else None

    @property
    def session(self) -> Session:
        """The process's connections, key space and settings (made by the first user that needs them)."""
        if self._session is None:
            self._session = self._context.get(ProcessSession).session(self._context.environment)
        return self._session

    @property
    def keys(self) -> KeySpace:
        """The run's key space (``--etcd-key-size``, ``--etcd-key-space-size``, ``--etcd-key-distribution``): keys to
        draw (``keys.next_key()``, ``keys.next_write_key()``), the value to write (``keys.value``), the prefix."""
        return self.session.keys

    def put(self, key: bytes, value: bytes, *, lease: int = 0, name: str = "put") -> rpc_pb2.PutResponse | None:
        """Write ``value`` to ``key``.

        Args:
            key: The key, under ``--etcd-prefix`` (else ``KeyOutsidePrefixError``, nothing sent).
            value: The value; ``self.etcd.keys.value`` is one of ``--etcd-val-size`` bytes.
            lease: A lease ID (from ``lease_grant``) to attach the key to; 0: none.
            name: The request's name in Locust's statistics.

        Returns:
            etcd's PutResponse, or None when the call failed (counted as a failure).
        """
        self._check_prefix(key)
        response = self._call("Put", rpc_pb2.PutRequest(key=key, value=value, lease=lease), name)
        if response is not None:
            if self._notes is not None:
                self._notes.put(key, response.header.revision, self._acknowledged)
            watchers = self._context.get(ProcessWatchers)
            watching = watchers.latencies
            if watching is not None:  # this process's watchers' events of this put are timed from its acknowledgement
                watchers.local_writes = True
                watching.acknowledged(response.header.revision, self._acknowledged, self._fire_watch_event)
        return response

    def watch_reporter(self, name: str) -> Callable[[float], None]:
        """The report of one watch event as a ``name`` row: ``seconds`` from its write's acknowledgement to it."""
        fire = self._fire

        def report(seconds: float) -> None:
            fire(
                request_type=REQUEST_TYPE, name=name, response_time=seconds * 1000.0, response_length=0, exception=None
            )

        return report

    def range(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        serializable: bool | None = None,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        name: str | None = None,
    ) -> rpc_pb2.RangeResponse | None:
        """Read ``key``, or the keys of [key, range_end).

        Args:
            key: The key, or the first key of the range.
            range_end: The end of the range (excluded); empty: ``key`` alone.
            serializable: True: a serializable read (the member's local state, possibly stale); False: linearizable
                (confirmed with the leader). None: ``--etcd-consistency`` decides.
            limit: The most keys returned; 0: all.
            keys_only: Return the keys without their values.
            count_only: Return only the count of the keys.
            name: The request's name; None: ``range/linearizable`` or ``range/serializable``.

        Returns:
            etcd's RangeResponse, or None when the call failed.
        """
        if serializable is None:
            serializable = self.session.settings.consistency == "s"
        request = rpc_pb2.RangeRequest(
            key=key,
            range_end=range_end,
            serializable=serializable,
            limit=limit,
            keys_only=keys_only,
            count_only=count_only,
        )
        return self._range_request(request, name or RANGE_NAMES[serializable])

    def _range_request(self, request: rpc_pb2.RangeRequest, name: str) -> rpc_pb2.RangeResponse | None:
        key, serializable, range_end = request.key, request.serializable, request.range_end
        notes = self._notes
        if notes is None:
            return self._call("Range", request, name)
        # what this process knew acknowledged when the read was sent: the newest revision, and the key's latest write
        connection = self.session.pool.next_connection()
        sent = notes.read_sent(key, serializable, range_end)
        response = self._invoke(connection, connection.kv.Range, request, name)
        if response is not None:  # judged after the call's timing
            notes.read_answered(sent, response, key, serializable, connection.endpoint.target, name)
        return response

    def ranges(self, serializable: bool | None = None) -> Callable[[], rpc_pb2.RangeResponse | None]:
        """The read of the range workloads, as a function to call once per request (for ``EtcdUser.repeat``).

        One drawn key, or ``--etcd-range-keys`` consecutive keys from a drawn one, with ``--etcd-range-limit``,
        ``--etcd-range-count-only`` and ``--etcd-range-keys-only``, or with ``--etcd-range-paginate`` the whole key
        space in pages (``paged_list``); each shape under its own request name (``range/1000 keys/linearizable``).

        Args:
            serializable: The consistency of the reads; None: ``--etcd-consistency``.

        Returns:
            A function without arguments that makes one read and returns what ``range`` (or ``paged_list``) returns.
        """
        operation = workloads.ranges(serializable)(BlockingClient(self))
        return lambda: run_now(operation())

    def paged_list(
        self, limit: int, serializable: bool, keys_only: bool, page_name: str, list_name: str
    ) -> list[rpc_pb2.RangeResponse] | None:
        """The whole key space in pages of ``limit`` keys, as kube-apiserver lists: each page from the last key + NUL,
        every page after the first at the first one's revision (a consistent list), until etcd says there is no more.

        Each page is reported under ``page_name``; the list under ``list_name``, timed from the first page's send to
        the last page's answer, its response length all the pages' bytes (and its intended-time latency, when a
        schedule sent it). A failed page fails the list under the page's error.

        Args:
            limit: Keys per page.
            serializable: The consistency of every page.
            keys_only: Pages of keys without their values.
            page_name: The request name of each page.
            list_name: The request name of the whole list.

        Returns:
            The pages (etcd's RangeResponses), or None when a page failed.
        """
        keys = self.keys
        request = rpc_pb2.RangeRequest(
            key=keys.prefix, range_end=keys.range_end, serializable=serializable, limit=limit, keys_only=keys_only
        )
        return self._paged(request, page_name, list_name)

    def _paged(self, request: rpc_pb2.RangeRequest, page_name: str, list_name: str) -> list | None:
        intended, self.intended_start = self.intended_start, None  # the list is what the schedule sent, not a page
        pages: list[rpc_pb2.RangeResponse] = []
        started = time.perf_counter()
        while True:
            page = self._call("Range", request, page_name)
            if page is None:
                break
            pages.append(page)
            if not page.more or not page.kvs:
                break
            request.key = next_page_key(page.kvs[-1].key)
            request.revision = pages[0].header.revision
        context = {INTENDED_CONTEXT_KEY: (self._acknowledged - intended) * 1000.0} if intended is not None else {}
        failed = page is None
        self._fire(
            request_type=REQUEST_TYPE,
            name=list_name,
            response_time=(self._acknowledged - started) * 1000.0,
            response_length=0 if failed else sum(answer.ByteSize() for answer in pages),
            exception=self._failure if failed else None,
            context=context,
        )
        return None if failed else pages

    def delete(self, key: bytes, range_end: bytes = b"", *, name: str = "delete") -> rpc_pb2.DeleteRangeResponse | None:
        """Delete ``key``, or the keys of [key, range_end), under ``--etcd-prefix`` (else ``KeyOutsidePrefixError``).

        Returns:
            etcd's DeleteRangeResponse, or None when the call failed.
        """
        self._check_prefix(key, range_end)
        notes = self._notes
        if notes is None:
            return self._call("DeleteRange", rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end), name)
        if range_end:
            notes.range_deleted()
            return self._call("DeleteRange", rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end), name)
        # a delete cut short (a failure, or the user stopped while it waited) may still have been applied
        index = notes.delete_sent(key)
        response = self._call("DeleteRange", rpc_pb2.DeleteRangeRequest(key=key), name)
        revision = response.header.revision if response is not None else None
        notes.delete_answered(index, key, revision, self._acknowledged)
        return response

    def txn(
        self,
        compare: Iterable[rpc_pb2.Compare] = (),
        success: Iterable[rpc_pb2.RequestOp] = (),
        failure: Iterable[rpc_pb2.RequestOp] = (),
        *,
        name: str = "txn",
    ) -> rpc_pb2.TxnResponse | None:
        """One transaction: if every comparison holds, the ``success`` operations, else the ``failure`` ones.

        Args:
            compare: ``rpc_pb2.Compare`` messages (a key's value, version, create or mod revision, or lease).
            success: ``rpc_pb2.RequestOp`` messages (put, range, delete range or a nested txn) run when all hold.
            failure: The operations run otherwise.
            name: The request's name.

        Returns:
            etcd's TxnResponse (``succeeded`` tells which branch ran), or None when the call failed. A write of
            either branch outside ``--etcd-prefix`` raises ``KeyOutsidePrefixError`` before anything is sent.
        """
        return self._txn(rpc_pb2.TxnRequest(compare=compare, success=success, failure=failure), name)

    def _txn(self, request: rpc_pb2.TxnRequest, name: str) -> rpc_pb2.TxnResponse | None:
        self._check_ops((*request.success, *request.failure))
        response = self._call("Txn", request, name)
        if self._notes is not None:
            self._notes.txn(request, response, self._acknowledged)
        return response

    def _read_modify_write(self, key: bytes, value: bytes, serializable: bool, name: str) -> rpc_pb2.PutResponse | None:
        """YCSB's read-modify-write: a range of ``key`` then a put of ``value`` to it, one ``name`` request from the
        range's send to the put's acknowledgement, as YCSB times it; a failure of either is the operation's."""
        self._check_prefix(key)
        connection = self.session.pool.next_connection()
        read = rpc_pb2.RangeRequest(key=key, serializable=serializable)
        _, error, seconds, ended = self._unary(connection, connection.kv.Range, read)
        if error is not None:
            return self._report(name, None, error, seconds, ended)
        sent = ended - seconds
        connection = self.session.pool.next_connection()
        response, error, _, ended = self._unary(connection, connection.kv.Put, rpc_pb2.PutRequest(key=key, value=value))
        if response is not None and self._notes is not None:
            self._notes.put(key, response.header.revision, ended)
        return self._report(name, response, error, ended - sent, ended)

    def _check_ops(self, ops: Iterable[rpc_pb2.RequestOp]) -> None:
        for op in ops:
            kind = op.WhichOneof("request")
            if kind == "request_put":
                self._check_prefix(op.request_put.key)
            elif kind == "request_delete_range":
                self._check_prefix(op.request_delete_range.key, op.request_delete_range.range_end)
            elif kind == "request_txn":  # etcd runs nested transactions too
                self._check_ops((*op.request_txn.success, *op.request_txn.failure))

    def txn_put(self, ops: int | None = None, *, name: str = "txn-put") -> rpc_pb2.TxnResponse | None:
        """One transaction of ``ops`` (None: ``--etcd-txn-ops``) puts to distinct keys of the key space, as etcd's
        ``benchmark txn-put``. Returns etcd's TxnResponse, or None when the call failed."""
        return self._txn(puts(self.keys, ops or self.session.settings.txn_ops), name)

    def txn_mixed(self, *, name: str = "txn-mixed") -> rpc_pb2.TxnResponse | None:
        """A read or a write transaction of ``--etcd-txn-ops`` operations, reads at ``--etcd-rw-ratio`` per write
        (etcd's ``benchmark txn-mixed``); reported as ``NAME-read`` and ``NAME-write`` (``txn-mixed-read``,
        ``txn-mixed-write``). Returns etcd's TxnResponse, or None when the call failed."""
        return self._txn(*mixed_txn(self.keys, self.session.settings, self._random(), name))

    def lease_grant(self, ttl: int, *, name: str = "lease-grant") -> rpc_pb2.LeaseGrantResponse | None:
        """Grant a lease of ``ttl`` seconds. Returns etcd's LeaseGrantResponse (its ``ID`` is the lease's), or None
        when the call failed."""
        connection = self.session.pool.next_connection()
        return self._invoke(connection, connection.lease.LeaseGrant, rpc_pb2.LeaseGrantRequest(TTL=ttl), name)

    def lease_revoke(self, lease_id: int, *, name: str = "lease-revoke") -> rpc_pb2.LeaseRevokeResponse | None:
        """Revoke the lease ``lease_id``: etcd deletes the keys attached to it. Returns etcd's LeaseRevokeResponse, or
        None when the call failed."""
        connection = self.session.pool.next_connection()
        return self._invoke(connection, connection.lease.LeaseRevoke, rpc_pb2.LeaseRevokeRequest(ID=lease_id), name)

    def lease_keep_alive(
        self, lease_id: int, *, name: str = "lease-keepalive"
    ) -> rpc_pb2.LeaseKeepAliveResponse | None:
        """One keep-alive round trip on this user's LeaseKeepAlive stream (opened on first use, opened again after a
        failure). A lease that expired or was revoked fails as ``etcdserver: requested lease not found``.
        Returns etcd's LeaseKeepAliveResponse, or None when the call failed."""
        session = self.session
        if self._keep_alive is None:
            self._keep_alive = session.bridge.run(_open_keep_alive, session.pool.next_connection())
        result, error, seconds, ended = session.bridge.call(self._keep_alive.keep_alive, lease_id)
        if error is None and result.TTL <= 0:
            result, error = None, _LeaseNotFound()
        if error is not None:
            session.bridge.post(self._keep_alive.cancel)
            self._keep_alive = None  # a broken stream is opened again on the next call
        return self._report(name, result, error, seconds, ended)

    def put_and_watch(self, key: bytes, value: bytes, *, name: str = "watch") -> rpc_pb2.PutResponse | None:
        """Put ``key`` and wait for the events of ``--etcd-watch-streams`` × ``--etcd-watchers-per-stream``
        watchers on it: reported as one ``put`` and one ``watch`` per event, whose response time is the time from
        the put's acknowledgement to the event's arrival. A missing event fails as ``DEADLINE_EXCEEDED``.
        The watchers are opened on first use, and again when ``key`` changes. Returns the PutResponse, or None."""
        self._check_prefix(key)
        session = self.session
        settings = session.settings
        if self._watch is None or self._watch.key != key:
            self.stop_streams()
            connection = session.pool.next_connection()
            counts = self._record.watches if self._record is not None else None
            self._watch = session.bridge.run(
                _open_watch,
                connection,
                key,
                settings.watch_streams,
                settings.watchers_per_stream,
                settings.timeout,
                counts,
                session.pool.another_connection,
            )
        outcome, error, seconds, ended = session.bridge.call(
            self._watch.put_and_wait, session.pool.next_connection(), value, settings.timeout
        )
        if error is not None:
            return self._report("put", None, error, seconds, ended)
        response, put_seconds, acknowledged, latencies = outcome
        self._report("put", response, None, put_seconds, acknowledged)
        if self._notes is not None:
            self._notes.put(key, response.header.revision, acknowledged)
        for latency in latencies:  # inline, not through watch_reporter: a frame less per event
            self._fire(
                request_type=REQUEST_TYPE, name=name, response_time=latency * 1000.0, response_length=0, exception=None
            )
        for _ in range(self._watch.expected - len(latencies)):
            self._fire(
                request_type=REQUEST_TYPE,
                name=name,
                response_time=settings.timeout * 1000.0,
                response_length=0,
                exception="DEADLINE_EXCEEDED",
            )
        return response

    def stop_streams(self, catch_up: float = 0.0) -> None:
        """Close this user's lease keep-alive and watch streams (call it from ``on_stop`` after using them); with
        ``catch_up``, the watchers first get up to that many seconds to receive the events of the puts acknowledged
        here (the audit judges what was due)."""
        if self._session is None:
            return
        if self._watch is not None and catch_up > 0:
            self._session.bridge.call(self._watch.close, catch_up)
        for stream in (self._keep_alive, self._watch):
            if stream is not None:
                self._session.bridge.post(stream.cancel)
        self._keep_alive = self._watch = None

    def _check_prefix(self, key: bytes, range_end: bytes = b"") -> None:
        keys = self.session.keys
        if not key.startswith(keys.prefix) or (range_end and not keys.prefix < range_end <= keys.range_end):
            written = f"[{key!r}, {range_end!r})" if range_end else repr(key)
            raise KeyOutsidePrefixError(
                f"{written} is outside --etcd-prefix {keys.prefix.decode(errors='replace')!r}; "
                "write only keys under the prefix"
            )

    def _call(self, method: str, request, name: str):
        connection = self.session.pool.next_connection()
        return self._invoke(connection, getattr(connection.kv, method), request, name)

    def _invoke(self, connection, method, request, name: str):
        session = self.session
        result, error, seconds, ended = self._unary(connection, method, request)
        if error is not None and session.settings.credentials.user and error_label(error) == INVALID_TOKEN_LABEL:
            # tokens expire when unused: get a new one and retry once, timed afresh
            try:
                session.bridge.run(session.pool.authenticate, connection)
            except EndpointError:
                pass  # counted under the original label; the next call tries again
            else:
                result, error, seconds, ended = self._unary(connection, method, request)
        return self._report(name, result, error, seconds, ended)

    def _unary(self, connection: Connection, method, request) -> CallOutcome:
        """One call, counted on its connection for the pool's watchdog: calls waiting, and when one was answered."""
        token = connection.call_started()
        try:
            result, error, seconds, ended = self.session.bridge.unary(
                method, request, timeout=self.session.settings.timeout, metadata=connection.metadata
            )
        except BaseException:
            connection.call_ended(token, False, 0.0)  # killed or closed while waiting: no answer
            raise
        # counted out; a call the pool abandoned is reported as the loop engine's are (transport.errors.call_error)
        error = connection.call_finished(token, error, seconds, ended, self.session.settings.timeout)
        return result, error, seconds, ended

    def _report(self, name: str, result, error: BaseException | None, seconds: float, ended: float):
        """Fire Locust's request event for one call; return the response, or None for a failure.

        ``seconds`` and ``ended`` were taken on the loop thread at the call's status (time.perf_counter()): the
        intended-time latency ends there too, so intended minus service is the schedule's lateness alone.
        """
        pool = self.session.pool
        self._acknowledged = ended
        context = self._take_context(ended)
        started_at = time.time() - (time.perf_counter() - ended) - seconds  # Locust's start_time: the call's start
        if error is None:
            if pool.outage_started is not None:
                pool.end_outage(ended)
            self._fire_call(name, seconds, result.ByteSize(), None, context, started_at)
            return result
        self._failure = label = error_label(error)
        if label in LEADER_LOST_LABELS or label in SLOW_MEMBER_LABELS:
            self.session.bridge.post(pool.rediscover)
        self._fire_call(name, seconds, 0, label, context, started_at)
        if label in LEADER_LOST_LABELS:
            pool.begin_outage(label)
            # a dead channel fails at once: without a pause a closed-loop user would spin on it, counting thousands
            # of failures a second and taking the CPU that the surviving members need
            gevent.sleep(_OUTAGE_PAUSE)
        return None

    def _fire_call(
        self, name: str, seconds: float, length: int, exception: str | None, context: dict, started_at: float
    ) -> None:
        """Locust's request event of one call: ``seconds`` long from ``started_at`` (``time.time()``), ``length``
        bytes answered, failed: ``exception``."""
        self._fire(
            request_type=REQUEST_TYPE,
            name=name,
            response_time=seconds * 1000.0,
            response_length=length,
            exception=exception,
            context=context,
            start_time=started_at,
        )

    def _take_context(self, ended: float) -> dict:
        """The request event's context: the intended-time latency of a scheduled call (once: the schedule moves on)."""
        context = {}
        if self.intended_start is not None:
            context[INTENDED_CONTEXT_KEY] = (ended - self.intended_start) * 1000.0
            self.intended_start = None
        return context


class _LeaseNotFound(Exception):
    """A keep-alive answered with TTL 0: the lease expired or was revoked."""

    def details(self) -> str:
        return "etcdserver: requested lease not found"

    def code(self):
        return grpc.StatusCode.NOT_FOUND


async def _open_keep_alive(connection) -> KeepAliveStream:
    return KeepAliveStream(connection)


async def _open_watch(
    connection, key: bytes, streams: int, watchers: int, timeout: float, counts: WatchCounts | None, reopen
) -> WatchFanOut:
    fan_out = WatchFanOut(connection, key, streams, watchers, counts, reopen)
    await fan_out.start(timeout)
    return fan_out
