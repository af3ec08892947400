"""etcd's errors as the tool reports them: etcd's own text, else the gRPC status name, never a Python repr;
and which of them mean that the leader or a member was lost (the pool looks again) or that a token expired.
"""

import asyncio

# A leader change shows up as one of these; the leader is looked up again after them.
LEADER_LOST_LABELS = frozenset(
    {"etcdserver: leader changed", "etcdserver: no leader", "etcdserver: not leader", "UNAVAILABLE"}
)
# A member that stops answering in time (frozen, overloaded) is checked again too, without counting as an outage.
SLOW_MEMBER_LABELS = frozenset({"DEADLINE_EXCEEDED"})
INVALID_TOKEN_LABEL = "etcdserver: invalid auth token"


class EndpointError(RuntimeError):
    """Endpoints that cannot serve the run, told in one line."""


def error_label(error: BaseException) -> str:
    """etcd's own error text (``etcdserver: too many requests``), else the gRPC status name."""
    code = getattr(error, "code", None)
    if callable(code):
        details = error.details() or ""
        if details.startswith(("etcdserver:", "mvcc:", "auth:", "lease:")):
            return details
        return code().name
    if isinstance(error, asyncio.TimeoutError):
        return "DEADLINE_EXCEEDED"
    return f"{type(error).__name__}: {error}"


def error_detail(error: BaseException) -> str:
    """The label, with gRPC's own explanation where the label alone would not tell the cause (a TLS failure)."""
    label = error_label(error)
    details = error.details() if callable(getattr(error, "details", None)) else ""
    return label if not details or details == label else f"{label}: {details}"
