"""Which members the audit waits for before it compares them (``etcd_users.features.audit.hashkv``): those that do not
answer and those whose raft applied index is below the cluster's, from etcd's own Status messages."""

import grpc
from etcd3.etcdrpc import rpc_pb2
from google.protobuf.internal.encoder import _VarintBytes

from etcd_users.features.audit.hashkv import RAFT_APPLIED_INDEX_FIELD, applied_index, better, cluster_index, lagging
from etcd_users.features.audit.verdict import Hashes, MemberHash
from etcd_users.settings.connection import Endpoint


def status(committed: int, applied: int) -> rpc_pb2.StatusResponse:
    """A Status as etcd 3.4+ sends it: raftAppliedIndex is field 7, which the stubs predate."""
    message = rpc_pb2.StatusResponse(raftIndex=committed, version="3.5.1")
    tag = _VarintBytes(RAFT_APPLIED_INDEX_FIELD << 3)  # wire type 0, a varint
    return rpc_pb2.StatusResponse.FromString(message.SerializeToString() + tag + _VarintBytes(applied))


class Unavailable(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "connection refused")


MEMBERS = [(Endpoint(f"http://127.0.0.1:{port}", secure=False), None) for port in (2379, 2380, 2381)]


def test_the_applied_index_is_read_from_etcd_s_field_the_stubs_do_not_know():
    assert applied_index(status(1260, 1204)) == 1204
    assert applied_index(rpc_pb2.StatusResponse(raftIndex=5)) == 0  # a member before 3.4 does not say


def test_a_member_down_and_one_behind_are_waited_for_and_named_with_why():
    statuses = [status(1260, 1260), Unavailable(), status(1258, 1204)]
    index = cluster_index(statuses)
    assert index == 1260
    assert lagging(MEMBERS, statuses, index) == ["127.0.0.1:2380 UNAVAILABLE", "127.0.0.1:2381 applied 1,204 of 1,260"]


def test_every_member_at_the_index_first_seen_ends_the_wait_though_other_clients_write_on():
    first = cluster_index([status(1260, 1260), status(1260, 1255), status(1259, 1250)])
    # a minute later another client has written 5,000 entries: the followers trail the leader, but all passed 1,260
    later = [status(6260, 6260), status(6260, 6251), status(6259, 6240)]
    assert lagging(MEMBERS, later, first) == []
    assert lagging(MEMBERS, later, cluster_index(later)) != []  # a moving target would never be reached


def test_a_member_that_does_not_say_its_applied_index_is_not_waited_for():
    assert lagging(MEMBERS, [status(10, 10), status(10, 10), rpc_pb2.StatusResponse(raftIndex=3)], 10) == []
    assert cluster_index([Unavailable(), Unavailable(), Unavailable()]) == 0


def attempt(*compact_revisions: int | None) -> Hashes:
    """One attempt at the members' HashKV: a member's compact revision, or None for one that did not answer."""
    members = tuple(
        MemberHash(f"127.0.0.1:{2379 + i}", None, 0, "UNAVAILABLE")
        if compact is None
        else MemberHash(f"127.0.0.1:{2379 + i}", 7, compact)
        for i, compact in enumerate(compact_revisions)
    )
    return Hashes(1000, members)


def test_with_a_member_down_the_attempt_that_compared_the_others_is_kept_over_one_split_by_a_compaction():
    down_compared, split_by_compaction = attempt(None, 500, 500), attempt(None, 500, 900)
    assert len(down_compared.compared) == 2 and split_by_compaction.compared == ()
    assert better(split_by_compaction, down_compared) is down_compared
    assert better(down_compared, split_by_compaction) is down_compared
    # on a tie the latest wins: the members' newer state
    again = attempt(None, 900, 900)
    assert better(again, down_compared) is again
    assert better(split_by_compaction, None) is split_by_compaction
