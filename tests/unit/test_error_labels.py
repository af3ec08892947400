"""etcd's errors under etcd's own labels (``etcd_users.transport.errors.error_label``): the text etcd sent, else the
gRPC status name; the errors are gRPC's own, as the channel raises them."""

import asyncio

import grpc
import pytest

from etcd_users.transport.errors import AbandonedCall, ExpiredCall, call_error, error_detail, error_label


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


LABELS = [
    # etcd's mapped errors carry their own code and text
    (grpc.StatusCode.UNAVAILABLE, "etcdserver: leader changed", "etcdserver: leader changed"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: too many requests", "etcdserver: too many requests"),
    (
        grpc.StatusCode.OUT_OF_RANGE,
        "mvcc: required revision has been compacted",
        "mvcc: required revision has been compacted",
    ),
    # etcd 3.5 during a leader move: an error without a gRPC code of its own, UNKNOWN with etcd's text
    (grpc.StatusCode.UNKNOWN, "raft proposal dropped", "raft proposal dropped"),
    (grpc.StatusCode.UNKNOWN, "", "UNKNOWN"),
    # gRPC's own texts say nothing the code does not: the code
    (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", "DEADLINE_EXCEEDED"),
    (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", "UNAVAILABLE"),
]


@pytest.mark.parametrize("code, details, label", LABELS, ids=[f"{c.name}:{d}" for c, d, _ in LABELS])
def test_an_error_is_labelled_by_etcd_s_text_else_its_code(code, details, label):
    assert error_label(rpc_error(code, details)) == label


def test_the_detail_adds_grpc_s_text_only_where_the_label_lacks_it():
    assert error_detail(rpc_error(grpc.StatusCode.UNKNOWN, "raft proposal dropped")) == "raft proposal dropped"
    unavailable = rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
    assert error_detail(unavailable) == "UNAVAILABLE: failed to connect to all addresses"


def test_errors_of_the_tool_itself():
    assert error_label(AbandonedCall()) == "UNAVAILABLE"
    assert error_label(asyncio.TimeoutError()) == "DEADLINE_EXCEEDED"
    assert error_label(asyncio.CancelledError()) == "CANCELLED"  # gRPC's label, never the Python type
    assert error_label(ValueError("boom")) == "ValueError: boom"


def test_a_call_the_pool_abandoned_is_unavailable_unless_it_had_run_out_of_time():
    timeout = 2.0
    closed = asyncio.CancelledError()  # what a call gets when the pool closes its channel under it
    # cut short by the pool before its deadline: UNAVAILABLE, as etcd's Go client says of a call on a closed connection
    assert error_label(call_error(closed, True, 1.2, timeout)) == "UNAVAILABLE"
    # it had waited its whole deadline when the pool's look at its member ended it: it ran out of time
    expired = call_error(closed, True, 2.0, timeout)
    assert isinstance(expired, ExpiredCall) and error_label(expired) == "DEADLINE_EXCEEDED"
    # gRPC's deadline ended it first: its label stays, though the pool replaced its channel before it was counted out
    deadline = rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert call_error(deadline, True, 2.0, timeout) is deadline
    # etcd answered: its own error, whatever became of the channel after
    refused = rpc_error(grpc.StatusCode.UNAVAILABLE, "etcdserver: leader changed")
    assert call_error(refused, True, 0.1, timeout) is refused
    # a call on the channel in use keeps its error; a success is a success
    assert call_error(closed, False, 2.5, timeout) is closed
    assert call_error(None, True, 2.5, timeout) is None
