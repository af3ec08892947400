"""etcd's errors as the tool reports them: etcd's own text, else the gRPC status name, never a Python repr;
and which of them mean that the leader or a member was lost (the pool looks again) or that a token expired.
"""

import asyncio

import grpc

# A leader change shows up as one of these; the leader is looked up again after them.
LEADER_LOST_LABELS = frozenset(
    {
        "etcdserver: leader changed",
        "etcdserver: no leader",
        "etcdserver: not leader",
        # a follower's answer to a request it forwarded to a leader that was lost
        "etcdserver: request timed out, possibly due to previous leader failure",
        "UNAVAILABLE",
    }
)
# A member that stops answering in time (frozen, overloaded) is checked again too, without counting as an outage.
SLOW_MEMBER_LABELS = frozenset({"DEADLINE_EXCEEDED"})
INVALID_TOKEN_LABEL = "etcdserver: invalid auth token"
# No answer from the member: the call ran out of time, its connection failed, or it was cancelled here.
UNANSWERED_LABELS = frozenset({"DEADLINE_EXCEEDED", "UNAVAILABLE", "CANCELLED"})


class EndpointError(RuntimeError):
    """Endpoints that cannot serve the run, told in one line."""


def error_label(error: BaseException) -> str:
    """etcd's own error text (``etcdserver: too many requests``), else the gRPC status name."""
    code = getattr(error, "code", None)
    if callable(code):
        details = error.details() or ""
        if details.startswith(("etcdserver:", "mvcc:", "auth:", "lease:")):
            return details
        # an error etcd has no gRPC code for comes as UNKNOWN with etcd's text: 3.5 answers a put that the leader
        # drops while it hands over leadership (move-leader) or while there is none with "raft proposal dropped"
        if code() == grpc.StatusCode.UNKNOWN and details:
            return details
        return code().name
    if isinstance(error, asyncio.TimeoutError):
        return "DEADLINE_EXCEEDED"
    if isinstance(error, asyncio.CancelledError):  # a call cancelled here (its member left out, the run stopping)
        return "CANCELLED"
    return f"{type(error).__name__}: {error}"


def error_detail(error: BaseException) -> str:
    """The label, with gRPC's own explanation where the label alone would not tell the cause (a TLS failure)."""
    label = error_label(error)
    details = error.details() if callable(getattr(error, "details", None)) else ""
    return label if not details or details == label else f"{label}: {details}"


class AbandonedCall(Exception):
    """A call the pool gave up on: its member stopped answering and was left out, so it ends now, not at its deadline.
    Reported as gRPC's ``UNAVAILABLE``, as etcd's own Go client reports a call on a connection it closed."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the member stopped answering; the call was abandoned"
