"""etcd's KV calls with the request and the answer as bytes: what the ready workloads send on the loop thread.

grpc.aio takes a method without a serializer and sends the bytes it is given, and hands back the answer's bytes
unparsed. A put then costs one concatenation of bytes made once (the key's field header, the value's field) with the
key, where a protobuf message costs 1.7 µs to build and serialize, and its answer is parsed only when something reads
it (the audit, a paged list); its size is its length, which is what protobuf's ``ByteSize`` would count. The other
requests are protobuf messages serialized here. ``tests/unit/test_engine.py`` checks these bytes against protobuf's.
"""

from __future__ import annotations

import grpc
from etcd3.etcdrpc import rpc_pb2

_KV = "/etcdserverpb.KV/"
_SERIALIZABLE = b"\x38\x01"  # RangeRequest field 7 (serializable), varint 1


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_header(number: int, length: int) -> bytes:
    """The header of a length-delimited field: its tag, then its length."""
    return varint(number << 3 | 2) + varint(length)


class RawKV:
    """etcd's KV service on one channel, bytes in and bytes out."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.Put = channel.unary_unary(_KV + "Put")
        self.Range = channel.unary_unary(_KV + "Range")
        self.DeleteRange = channel.unary_unary(_KV + "DeleteRange")
        self.Txn = channel.unary_unary(_KV + "Txn")


class KeyRequests:
    """The bytes of the requests of one key (a put of one value, a read, a delete), for keys of one size.

    The field header of a key of ``key_size`` bytes is made once; a key of another size gets its own.
    """

    def __init__(self, key_size: int, value: bytes) -> None:
        self._key_size = key_size
        self._key_head = field_header(1, key_size)
        self._value_field = field_header(2, len(value)) + value if value else b""

    def _head(self, key: bytes) -> bytes:
        return self._key_head if len(key) == self._key_size else field_header(1, len(key))

    def put(self, key: bytes) -> bytes:
        """A PutRequest of ``key`` and the value."""
        return self._head(key) + key + self._value_field

    def read(self, key: bytes, serializable: bool) -> bytes:
        """A RangeRequest of ``key`` alone."""
        head = self._head(key)
        return head + key + _SERIALIZABLE if serializable else head + key

    def delete(self, key: bytes) -> bytes:
        """A DeleteRangeRequest of ``key`` alone."""
        return self._head(key) + key


def put_revision(answer: bytes) -> int:
    """The revision of a PutResponse (and of a DeleteRangeResponse, whose header is the same field)."""
    return rpc_pb2.PutResponse.FromString(answer).header.revision


parse_range = rpc_pb2.RangeResponse.FromString
parse_delete = rpc_pb2.DeleteRangeResponse.FromString
parse_txn = rpc_pb2.TxnResponse.FromString
