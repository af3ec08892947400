"""etcd's errors as the tool reports them: etcd's own text, else the gRPC status name, never a Python repr;
which of them mean that the leader or a member was lost (the pool looks again) or that a token expired; and what a
call the pool abandoned is reported as (``call_error``), the same for both engines' clients.
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
DEADLINE_LABEL = "DEADLINE_EXCEEDED"
# A member that stops answering in time (frozen, overloaded) is checked again too, without counting as an outage.
SLOW_MEMBER_LABELS = frozenset({DEADLINE_LABEL})
INVALID_TOKEN_LABEL = "etcdserver: invalid auth token"
# No answer from the member: the call ran out of time, its connection failed, or it was cancelled here.
UNANSWERED_LABELS = frozenset({DEADLINE_LABEL, "UNAVAILABLE", "CANCELLED"})


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
        return DEADLINE_LABEL
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


class ExpiredCall(Exception):
    """A call that had waited its whole deadline when the pool abandoned it: it ran out of time, whoever ended it.
    Reported as gRPC's ``DEADLINE_EXCEEDED``, as etcd's Go client reports a call that ran out of time."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "the call ran out of its --etcd-timeout as its member was left out"


def call_error(error: BaseException | None, abandoned: bool, seconds: float, timeout: float) -> BaseException | None:
    """The error a finished call is reported with; None for a success.

    ``abandoned``: the pool replaced the channel under the call (its member was left out); ``seconds``: from the call's
    start to its status; ``timeout``: its deadline (``--etcd-timeout``). An abandoned call without etcd's answer ran
    out of time when its deadline ended it or it had waited that long anyway (the pool's look at the member takes time
    too): ``DEADLINE_EXCEEDED``. One the pool cut short before is ``UNAVAILABLE`` (``AbandonedCall``). Any other call,
    and etcd's own error, keeps its error: the two labels tell a slow member's calls from those the pool gave up on.
    """
    if error is None or not abandoned:
        return error
    label = error_label(error)
    if label not in UNANSWERED_LABELS:
        return error  # etcd answered: its own error, whatever became of the channel after
    if label == DEADLINE_LABEL:
        return error
    return ExpiredCall() if seconds >= timeout else AbandonedCall()
