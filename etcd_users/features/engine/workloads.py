"""The ready workloads' request loops as coroutines on the loop thread: each workload's operation, and ``repeat``,
which runs it back to back or at ``--etcd-user-rate`` as ``EtcdUser.repeat`` does on a greenlet.

An operation is a function without arguments that returns an awaitable of one request (or of the requests of one
operation: a put then a delete, a YCSB read-modify-write). Each workload below makes its operation from a user's
``LoopClient`` with the same keys, names and shapes as its greenlet twin in ``etcd_users.users``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import random
import time
from collections.abc import Awaitable, Callable

from etcd_users.features.engine.client import LoopClient
from etcd_users.workload_model import ycsb
from etcd_users.workload_model.arrivals import first_arrival, intervals
from etcd_users.workload_model.requests import RangeRead, mixed_txn, puts, range_read

Operation = Callable[[], Awaitable[object]]

# uvloop wakes a timer at the nearest millisecond of a loop time taken when its turn began, up to a millisecond early:
# a sleep asks half a millisecond more, and the schedule looks at the clock again when it wakes
TIMER_ROUNDING = 0.0005
Workload = Callable[[LoopClient], Operation]


async def repeat(client: LoopClient, operation: Operation, running: Callable[[], bool]) -> None:
    """Run ``operation`` while ``running()``: back to back, or at ``--etcd-user-rate`` per second on an intended
    schedule that does not slip when a response is late (the next request goes out at once to catch up, and its
    latency is also measured from when it was due). A request never leaves before its due time."""
    settings = client.settings
    rate = settings.user_rate
    if rate <= 0:
        while running():
            await operation()
        return
    generator = random.Random()
    interval = intervals(settings.arrival, rate, generator)  # --etcd-arrival: fixed or Poisson
    due = time.perf_counter() + first_arrival(settings.arrival, rate, generator)
    while running():
        delay = due - time.perf_counter()
        while delay > 0:  # a timer may wake early: never send before the due time
            await asyncio.sleep(delay + TIMER_ROUNDING)
            if not running():
                return
            delay = due - time.perf_counter()
        client.intended_start = due
        await operation()
        due += interval()


def put(client: LoopClient) -> Operation:
    """``EtcdPutUser``: the value to keys of the key space."""
    next_key, put = client.keys.next_write_key, client.put
    return lambda: put(next_key())


def ranges(serializable: bool | None) -> Workload:
    """The range users: the read of ``--etcd-range-*`` (``EtcdClient.ranges``), of the consistency given (None:
    ``--etcd-consistency``)."""

    def workload(client: LoopClient) -> Operation:
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


def txn_put(client: LoopClient) -> Operation:
    """``EtcdTxnPutUser``: transactions of ``--etcd-txn-ops`` puts."""
    keys, count, txn = client.keys, client.settings.txn_ops, client.txn
    return lambda: txn(puts(keys, count), "txn-put")


def txn_mixed(client: LoopClient) -> Operation:
    """``EtcdTxnMixedUser``: read or write transactions at ``--etcd-rw-ratio`` reads per write."""
    keys, settings, draw, txn = client.keys, client.settings, random.Random().random, client.txn
    return lambda: txn(*mixed_txn(keys, settings, draw(), "txn-mixed"))


def delete(client: LoopClient) -> Operation:
    """``EtcdDeleteUser``: a put, then a delete of the same key."""
    next_key = client.keys.next_write_key

    async def put_then_delete() -> None:
        key = next_key()
        await client.put(key)
        await client.delete(key)

    return put_then_delete


def mixed(client: LoopClient) -> Operation:
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


def ycsb_workload(client: LoopClient) -> Operation:
    """``EtcdYcsbUser``: YCSB's operations in the proportions of ``--etcd-ycsb`` (``YcsbClient.operation``)."""
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
