"""The transport on its own, against a real etcd: unary calls made on the loop thread come back to their greenlet."""

import locust  # noqa: F401

import time

import gevent
import grpc
import pytest
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from etcd_users.transport.bridge import Bridge
from etcd_users.transport.errors import error_label

pytestmark = pytest.mark.e2e


@pytest.fixture
def bridge():
    made = Bridge()
    yield made
    made.close()


def open_kv(bridge: Bridge, endpoint: str) -> tuple[grpc.aio.Channel, rpc_pb2_grpc.KVStub]:
    async def open_channel():
        channel = grpc.aio.insecure_channel(endpoint.split("://", 1)[1])
        return channel, rpc_pb2_grpc.KVStub(channel)

    return bridge.run(open_channel)


def test_unary_calls_return_the_response_or_etcd_s_error_with_their_time(bridge, fresh_etcd1):
    channel, kv = open_kv(bridge, fresh_etcd1.endpoints[0])
    request = rpc_pb2.PutRequest(key=b"/locust-etcd/transport", value=b"v")
    results = [None] * 32

    def put(index: int) -> None:
        results[index] = bridge.unary(kv.Put, request, timeout=5.0)

    submitted = time.perf_counter()
    gevent.joinall([gevent.spawn(put, index) for index in range(len(results))], raise_error=True)
    woken = time.perf_counter()
    revisions = set()
    for response, error, seconds, ended in results:
        assert error is None
        assert isinstance(response, rpc_pb2.PutResponse)
        revisions.add(response.header.revision)
        assert 0 < seconds < 5.0
        # the end is taken on the loop thread, on the clock of the start: inside the greenlets' wait
        assert submitted <= ended - seconds < ended <= woken
    assert len(revisions) == len(results)  # every put went through, one revision each

    response, error, seconds, _ = bridge.unary(kv.Put, rpc_pb2.PutRequest(key=b"", value=b"v"), timeout=5.0)
    assert response is None
    assert error_label(error) == "etcdserver: key is not provided"
    assert 0 < seconds < 5.0
    bridge.run(channel.close)


def test_a_call_cut_off_by_its_channel_closing_comes_back_at_once(bridge, fresh_etcd1):
    channel, kv = open_kv(bridge, fresh_etcd1.endpoints[0])
    fresh_etcd1.pause_member(0)  # the call below gets no answer
    try:
        waiting = gevent.spawn(bridge.unary, kv.Range, rpc_pb2.RangeRequest(key=b"/locust-etcd/a"), timeout=30.0)
        gevent.sleep(0.5)
        assert not waiting.ready()
        closed_at = time.monotonic()
        bridge.run(channel.close)
        response, error, seconds, _ = waiting.get(timeout=5.0)
    finally:
        fresh_etcd1.resume_member(0)
    assert time.monotonic() - closed_at < 5.0
    assert response is None
    assert error_label(error) in ("CANCELLED", "CancelledError: ")
    # it waited for the close (not ready after the sleep), then came back: its time ends at the close; where in
    # the sleep it started depends on the machine's scheduling
    assert 0 < seconds < 5.0
