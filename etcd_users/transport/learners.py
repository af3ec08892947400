"""etcd's Cluster API as of 3.4, with learners: MemberAdd as a learner, MemberPromote, and MemberList's ``isLearner``.

The stubs of ``etcd3.etcdrpc`` come from etcd 3.3's protos, which have neither. The messages here are declared with
etcd's own field numbers (``api/etcdserverpb/rpc.proto``), so they go over the wire as etcd's; the response headers are
left undeclared (kept as unknown fields).
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "locustetcd.cluster"
_TYPES = descriptor_pb2.FieldDescriptorProto
# message: (field name, number, type, repeated, message type)
_MESSAGES = {
    "Member": (
        ("ID", 1, _TYPES.TYPE_UINT64, False, ""),
        ("name", 2, _TYPES.TYPE_STRING, False, ""),
        ("peerURLs", 3, _TYPES.TYPE_STRING, True, ""),
        ("clientURLs", 4, _TYPES.TYPE_STRING, True, ""),
        ("isLearner", 5, _TYPES.TYPE_BOOL, False, ""),
    ),
    "MemberAddRequest": (
        ("peerURLs", 1, _TYPES.TYPE_STRING, True, ""),
        ("isLearner", 2, _TYPES.TYPE_BOOL, False, ""),
    ),
    "MemberAddResponse": (
        ("member", 2, _TYPES.TYPE_MESSAGE, False, "Member"),
        ("members", 3, _TYPES.TYPE_MESSAGE, True, "Member"),
    ),
    "MemberRemoveRequest": (("ID", 1, _TYPES.TYPE_UINT64, False, ""),),
    "MemberRemoveResponse": (("members", 2, _TYPES.TYPE_MESSAGE, True, "Member"),),
    "MemberPromoteRequest": (("ID", 1, _TYPES.TYPE_UINT64, False, ""),),
    "MemberPromoteResponse": (("members", 2, _TYPES.TYPE_MESSAGE, True, "Member"),),
    "MemberListRequest": (("linearizable", 1, _TYPES.TYPE_BOOL, False, ""),),
    "MemberListResponse": (("members", 2, _TYPES.TYPE_MESSAGE, True, "Member"),),
}


def _classes() -> dict[str, type]:
    proto = descriptor_pb2.FileDescriptorProto(name="locust_etcd_cluster.proto", package=_PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, repeated, type_name in fields:
            label = _TYPES.LABEL_REPEATED if repeated else _TYPES.LABEL_OPTIONAL
            message.field.add(name=field, number=number, type=kind, label=label, json_name=field)
            if type_name:
                message.field[-1].type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES
    }


_CLASSES = _classes()
Member = _CLASSES["Member"]
MemberAddRequest = _CLASSES["MemberAddRequest"]
MemberRemoveRequest = _CLASSES["MemberRemoveRequest"]
MemberPromoteRequest = _CLASSES["MemberPromoteRequest"]
MemberListRequest = _CLASSES["MemberListRequest"]


class ClusterStub:
    """etcd's Cluster service on a channel (grpc.aio or not), learners included."""

    def __init__(self, channel) -> None:
        for method in ("MemberAdd", "MemberRemove", "MemberPromote", "MemberList"):
            request, response = _CLASSES[f"{method}Request"], _CLASSES[f"{method}Response"]
            call = channel.unary_unary(
                f"/etcdserverpb.Cluster/{method}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )
            setattr(self, method, call)
