"""The requests of the ready workloads as both ways of running users build them (``EtcdClient`` on a greenlet,
``etcd_users.features.engine`` on the loop thread): the range workloads' read and its name, the transactions of
``txn-put`` and ``txn-mixed``. Neither Locust nor gevent.
"""

from __future__ import annotations

from dataclasses import dataclass

from etcd3.etcdrpc import rpc_pb2

from etcd_users.workload_model.keys import KeySpace

RANGE_NAMES = {False: "range/linearizable", True: "range/serializable"}


@dataclass(frozen=True)
class RangeRead:
    """What each read of the range workloads is: one key (``shaped`` False), a range of ``--etcd-range-keys`` keys
    with the range options, or the whole key space in pages (``paged``); and its request names."""

    serializable: bool
    name: str
    shaped: bool = False
    paged: bool = False
    list_name: str = ""
    keys: int = 1
    limit: int = 0
    keys_only: bool = False
    count_only: bool = False

    def request(self, key: bytes, range_end: bytes = b"") -> rpc_pb2.RangeRequest:
        """The RangeRequest of a shaped read of [key, range_end)."""
        return rpc_pb2.RangeRequest(
            key=key,
            range_end=range_end,
            serializable=self.serializable,
            limit=self.limit,
            keys_only=self.keys_only,
            count_only=self.count_only,
        )

    def first_page(self, keys: KeySpace) -> rpc_pb2.RangeRequest:
        """The first page of a paged list of the key space."""
        return rpc_pb2.RangeRequest(
            key=keys.prefix,
            range_end=keys.range_end,
            serializable=self.serializable,
            limit=self.limit,
            keys_only=self.keys_only,
        )


def range_read(settings, serializable: bool | None) -> RangeRead:
    """The range workloads' read under ``settings`` (``serializable`` None: ``--etcd-consistency``)."""
    if serializable is None:
        serializable = settings.consistency == "s"
    if not settings.range_name:
        return RangeRead(serializable, RANGE_NAMES[serializable])
    consistency = RANGE_NAMES[serializable].partition("/")[2]
    name = f"range/{settings.range_name}/{consistency}"
    if settings.range_paginate:
        return RangeRead(
            serializable,
            name,
            paged=True,
            list_name=f"range/{settings.list_name}/{consistency}",
            limit=settings.range_limit,
            keys_only=settings.range_keys_only,
        )
    return RangeRead(
        serializable,
        name,
        shaped=True,
        keys=settings.range_keys,
        limit=settings.range_limit,
        keys_only=settings.range_keys_only,
        count_only=settings.range_count_only,
    )


def puts(keys: KeySpace, count: int) -> rpc_pb2.TxnRequest:
    """A transaction of ``count`` puts of the value to distinct keys of the key space (``benchmark txn-put``)."""
    value = keys.value
    return rpc_pb2.TxnRequest(
        success=[
            rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value))
            for key in keys.distinct_keys(count, write=True)
        ]
    )


def reads(keys: KeySpace, count: int) -> rpc_pb2.TxnRequest:
    """A transaction of ``count`` reads of distinct keys of the key space (``txn-mixed``'s reads)."""
    return rpc_pb2.TxnRequest(
        success=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key)) for key in keys.distinct_keys(count)]
    )


def mixed_txn(keys: KeySpace, settings, draw: float, name: str) -> tuple[rpc_pb2.TxnRequest, str]:
    """``txn-mixed``'s next transaction and its name: reads at ``--etcd-rw-ratio`` per write, by ``draw`` in [0, 1)."""
    if draw * (1.0 + settings.rw_ratio) < settings.rw_ratio:
        return reads(keys, settings.txn_ops), f"{name}-read"
    return puts(keys, settings.txn_ops), f"{name}-write"
