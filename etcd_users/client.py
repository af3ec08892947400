"""Instrumented etcd calls: each one timed on the loop around the RPC itself and reported to Locust.

Request type ``etcd``; failures are reported under etcd's own error text or the gRPC status name, and never
raise into the user's task: a run that hits etcd errors keeps running and counts them.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time
from collections.abc import Iterable

from etcd3.etcdrpc import rpc_pb2

from etcd_users import session
from etcd_users.endpoints import INVALID_TOKEN_LABEL, LEADER_LOST_LABELS, error_label
from etcd_users.keys import KeySpace

REQUEST_TYPE = "etcd"
RANGE_NAMES = {False: "range/linearizable", True: "range/serializable"}


class KeyOutsidePrefixError(ValueError):
    """A write outside ``--etcd-prefix``: the tool never touches keys it was not given."""


class EtcdClient:
    """``self.etcd`` of an EtcdUser: put, range, delete and txn, each reported as one Locust request.

    Each method returns etcd's response message, or None when the call failed (the failure is counted).
    """

    def __init__(self, environment) -> None:
        self.environment = environment
        self._fire = environment.events.request.fire
        self._session: session.Session | None = None
        # set by a rate-driven loop: when the request should have been sent (time.perf_counter())
        self.intended_start: float | None = None

    @property
    def session(self) -> "session.Session":
        if self._session is None:
            self._session = session.current(self.environment)
        return self._session

    @property
    def keys(self) -> KeySpace:
        return self.session.keys

    def put(self, key: bytes, value: bytes, *, lease: int = 0, name: str = "put") -> rpc_pb2.PutResponse | None:
        self._check_prefix(key)
        return self._call("Put", rpc_pb2.PutRequest(key=key, value=value, lease=lease), name)

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
        """Read ``key`` (or [key, range_end)); consistency from ``--etcd-consistency`` unless given."""
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
        return self._call("Range", request, name or RANGE_NAMES[serializable])

    def delete(self, key: bytes, range_end: bytes = b"", *, name: str = "delete") -> rpc_pb2.DeleteRangeResponse | None:
        self._check_prefix(key, range_end)
        return self._call("DeleteRange", rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end), name)

    def txn(
        self,
        compare: Iterable[rpc_pb2.Compare] = (),
        success: Iterable[rpc_pb2.RequestOp] = (),
        failure: Iterable[rpc_pb2.RequestOp] = (),
        *,
        name: str = "txn",
    ) -> rpc_pb2.TxnResponse | None:
        request = rpc_pb2.TxnRequest(compare=compare, success=success, failure=failure)
        for op in (*request.success, *request.failure):
            kind = op.WhichOneof("request")
            if kind == "request_put":
                self._check_prefix(op.request_put.key)
            elif kind == "request_delete_range":
                self._check_prefix(op.request_delete_range.key, op.request_delete_range.range_end)
        return self._call("Txn", request, name)

    def _check_prefix(self, key: bytes, range_end: bytes = b"") -> None:
        keys = self.session.keys
        if not key.startswith(keys.prefix) or (range_end and not keys.prefix < range_end <= keys.range_end):
            raise KeyOutsidePrefixError(
                f"{key!r} is outside --etcd-prefix {keys.prefix.decode(errors='replace')!r}; "
                "write only keys under the prefix"
            )

    def _call(self, method: str, request, name: str):
        session = self.session
        pool = session.pool
        connection = pool.next_connection()
        result, error, seconds = session.bridge.call(
            getattr(connection.kv, method), request, timeout=session.settings.timeout, metadata=connection.metadata
        )
        label = None if error is None else error_label(error)
        if label == INVALID_TOKEN_LABEL and session.settings.credentials.user:
            # tokens expire when unused: get a new one and retry once, timed afresh
            session.bridge.run(pool.authenticate, connection)
            result, error, seconds = session.bridge.call(
                getattr(connection.kv, method), request, timeout=session.settings.timeout, metadata=connection.metadata
            )
            label = None if error is None else error_label(error)
        context = {}
        if self.intended_start is not None:
            context["intended_response_time"] = (time.perf_counter() - self.intended_start) * 1000.0
            self.intended_start = None
        if label is None:
            if pool.outage_started is not None:
                pool.end_outage()
            self._fire(
                request_type=REQUEST_TYPE,
                name=name,
                response_time=seconds * 1000.0,
                response_length=result.ByteSize(),
                exception=None,
                context=context,
            )
            return result
        if label in LEADER_LOST_LABELS:
            pool.begin_outage(label)
            session.bridge.post(pool.rediscover)
        self._fire(
            request_type=REQUEST_TYPE,
            name=name,
            response_time=seconds * 1000.0,
            response_length=0,
            exception=label,
            context=context,
        )
        return None
