"""A greenlet's ``EtcdClient`` as a ready workload's client (``etcd_users.workload_model.workloads``): the calls the
loop thread's client makes as coroutines, each made at once on the greenlet, so that a workload is defined once and
runs on either engine. The awaitable a call returns is already done: ``run_now`` takes its answer without a loop."""

from __future__ import annotations

from collections.abc import Awaitable

from etcd3.etcdrpc import rpc_pb2


def run_now(awaitable: Awaitable):
    """The answer of a coroutine that never suspends (every call in it made at once on this greenlet)."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value
    awaitable.close()
    raise RuntimeError("a ready workload's operation waited on a loop, on a greenlet")


class BlockingClient:
    """``WorkloadClient``'s calls on an ``EtcdClient``, each reported by it as any of its calls (the private ones are
    the public calls' own, taking the request a workload built)."""

    def __init__(self, etcd) -> None:  # an EtcdClient (which makes these for its ranges: not imported here)
        self.etcd = etcd
        self.keys = etcd.keys
        self.settings = etcd.session.settings
        self._value = self.keys.value

    async def put(self, key: bytes, name: str = "put") -> rpc_pb2.PutResponse | None:
        return self.etcd.put(key, self._value, name=name)

    async def read(self, key: bytes, serializable: bool, name: str) -> rpc_pb2.RangeResponse | None:
        return self.etcd.range(key, serializable=serializable, name=name)

    async def range(self, request: rpc_pb2.RangeRequest, name: str) -> rpc_pb2.RangeResponse | None:
        return self.etcd._range_request(request, name)

    async def paged_list(
        self, request: rpc_pb2.RangeRequest, page_name: str, list_name: str
    ) -> list[rpc_pb2.RangeResponse] | None:
        return self.etcd._paged(request, page_name, list_name)

    async def delete(self, key: bytes, name: str = "delete") -> rpc_pb2.DeleteRangeResponse | None:
        return self.etcd.delete(key, name=name)

    async def read_modify_write(self, key: bytes, serializable: bool, name: str) -> rpc_pb2.PutResponse | None:
        return self.etcd._read_modify_write(key, self._value, serializable, name)

    async def txn(self, request: rpc_pb2.TxnRequest, name: str) -> rpc_pb2.TxnResponse | None:
        return self.etcd._txn(request, name)
