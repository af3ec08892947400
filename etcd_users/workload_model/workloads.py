"""The ready workloads, each defined once and run by either engine: a workload makes its user's operation from the
user's client, and an operation is a function without arguments that returns an awaitable of one request (or of the
requests of one operation: a put then a delete, a YCSB read-modify-write).

The client is the loop thread's (``etcd_users.features.engine.client.LoopClient``: each call a coroutine on the
transport's loop), or a greenlet's ``EtcdClient`` seen through ``etcd_users.user_base.blocking.BlockingClient``
(each call made at once on the greenlet, the awaitable already done). Either has the calls of ``WorkloadClient``.
Pure: nothing of Locust, gevent or asyncio.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

from etcd3.etcdrpc import rpc_pb2

from etcd_users.workload_model import ycsb
from etcd_users.workload_model.keys import KeySpace
from etcd_users.workload_model.requests import RangeRead, mixed_txn, puts, range_read

Operation = Callable[[], Awaitable[object]]


class WorkloadClient(Protocol):
    """What a workload asks of its user's client: each call one request of the user (or one operation of two),
    reported under ``name``; the answer, or None when it failed."""

    keys: KeySpace
    settings: object  # the run's EtcdSettings

    async def put(self, key: bytes, name: str = "put") -> object: ...
    async def read(self, key: bytes, serializable: bool, name: str) -> object: ...
    async def range(self, request: rpc_pb2.RangeRequest, name: str) -> object: ...
    async def paged_list(self, request: rpc_pb2.RangeRequest, page_name: str, list_name: str) -> object: ...
    async def delete(self, key: bytes, name: str = "delete") -> object: ...
    async def read_modify_write(self, key: bytes, serializable: bool, name: str) -> object: ...
    async def txn(self, request: rpc_pb2.TxnRequest, name: str) -> object: ...


Workload = Callable[[WorkloadClient], Operation]


def put(client: WorkloadClient) -> Operation:
    """``EtcdPutUser``: the value to keys of the key space."""
    next_key, put = client.keys.next_write_key, client.put
    return lambda: put(next_key())


def ranges(serializable: bool | None) -> Workload:
    """The range users: the read of ``--etcd-range-*`` (``EtcdClient.ranges``), of the consistency given (None:
    ``--etcd-consistency``)."""

    def workload(client: WorkloadClient) -> Operation:
        read = range_read(client.settings, serializable)
        keys = client.keys
        if read.paged:
            return lambda: client.paged_list(read.first_page(keys), read.name, read.list_name)
        if not read.shaped:
            next_key, get = keys.next_key, client.read
            return lambda: get(next_key(), read.serializable, read.name)
        if read.keys == 1:
            return lambda: client.range(read.request(keys.next_key()), read.name)
        return lambda: client.range(read.request(*keys.range_of(read.keys)), read.name)

    return workload


def txn_put(client: WorkloadClient) -> Operation:
    """``EtcdTxnPutUser``: transactions of ``--etcd-txn-ops`` puts."""
    keys, count, txn = client.keys, client.settings.txn_ops, client.txn
    return lambda: txn(puts(keys, count), "txn-put")


def txn_mixed(client: WorkloadClient) -> Operation:
    """``EtcdTxnMixedUser``: read or write transactions at ``--etcd-rw-ratio`` reads per write."""
    keys, settings, draw, txn = client.keys, client.settings, random.Random().random, client.txn
    return lambda: txn(*mixed_txn(keys, settings, draw(), "txn-mixed"))


def delete(client: WorkloadClient) -> Operation:
    """``EtcdDeleteUser``: a put, then a delete of the same key."""
    next_key = client.keys.next_write_key

    async def put_then_delete() -> None:
        key = next_key()
        await client.put(key)
        await client.delete(key)

    return put_then_delete


def mixed(client: WorkloadClient) -> Operation:
    """``EtcdMixedUser``: operations drawn by the weights of ``--etcd-mix``."""
    keys = client.keys
    operations = {
        "put": put(client),
        "range": ranges(None)(client),
        "range/linearizable": ranges(False)(client),
        "range/serializable": ranges(True)(client),
        "delete": lambda: client.delete(keys.next_key()),
        "txn-put": txn_put(client),
    }
    mix = client.settings.mix
    choices = [operations[name] for name, _ in mix]
    cumulative = list(itertools.accumulate(weight for _, weight in mix))
    draw = random.Random().random
    total = cumulative[-1]
    return lambda: choices[bisect.bisect(cumulative, draw() * total)]()


def ycsb_workload(client: WorkloadClient) -> Operation:
    """``EtcdYcsbUser``: YCSB's operations in the proportions of ``--etcd-ycsb``: read (a range of one key), update
    (a put of a loaded key), insert (a put of a new key past the loaded ones: once acknowledged, reads and scans
    reach it), scan (a range of 1-100 consecutive keys from a drawn one), read-modify-write (one operation of two
    calls, ``WorkloadClient.read_modify_write``)."""
    settings, keys = client.settings, client.keys
    uniform = random.Random().random
    serializable = settings.consistency == "s"
    read_name, update_name = ycsb.request_name(ycsb.READ), ycsb.request_name(ycsb.UPDATE)
    insert_name, rmw_name = ycsb.request_name(ycsb.INSERT), ycsb.request_name(ycsb.RMW)
    scan_name, scan_length = ycsb.request_name(ycsb.SCAN), ycsb.scan_lengths(uniform)
    scan = RangeRead(serializable, scan_name)  # a plain range: the range workloads' options are not YCSB's

    async def insert() -> None:
        index = keys.new_index()
        if await client.put(keys.key(index), insert_name) is not None:
            keys.inserted(index)  # acknowledged: "latest" reads and scans reach it from now on

    operations = {
        ycsb.READ: lambda: client.read(keys.next_key(), serializable, read_name),
        ycsb.UPDATE: lambda: client.put(keys.next_key(), update_name),
        ycsb.INSERT: insert,
        ycsb.SCAN: lambda: client.range(scan.request(*keys.scan_of(scan_length())), scan_name),
        ycsb.RMW: lambda: client.read_modify_write(keys.next_key(), serializable, rmw_name),
    }
    choose = ycsb.chooser(settings.ycsb, uniform)
    return lambda: operations[choose()]()
