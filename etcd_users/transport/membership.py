"""Which endpoints take load as the cluster's membership changes (``--etcd-disrupt`` remove, promote, add-learner):
the voting members' client URLs among those given, and with ``add-learner`` (the tool's own etcd, grown by the tool)
the voting members it added. A learner and a removed member get none.

The pool reads etcd's MemberList every ``POLL_S``; a cluster whose members advertise none of the endpoints given as
their client URLs (a load balancer, DNS names for addresses) is not followed, and the pool says so once. An endpoint
given that no member advertises is a removed member, or one spelt otherwise than the member advertises it: no load.
"""

from dataclasses import dataclass

from etcd_users.settings import Endpoint

POLL_S = 1.0
TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Change:
    endpoints: list[Endpoint]
    lines: list[str]  # what changed, one line each, for the log


def _url(url: str) -> str:
    return url.rstrip("/")


def followed(given: list[Endpoint], members) -> bool:
    """Whether a member (voting or learner) advertises one of the endpoints given as its client URL."""
    advertised = {_url(url) for member in members for url in member.clientURLs}
    return any(_url(endpoint.url) in advertised for endpoint in given)


def change(given: list[Endpoint], current: list[Endpoint], members, adds: bool) -> Change | None:
    """The endpoints that take load now that etcd lists ``members``, and what changed from ``current``; None when
    nothing did, or when no voting member would be left (a list from a member that is itself leaving)."""
    voters = [_url(url) for member in members if not member.isLearner for url in member.clientURLs]
    learners = {_url(url) for member in members if member.isLearner for url in member.clientURLs}
    wanted = [endpoint for endpoint in given if _url(endpoint.url) in voters]
    known = {_url(endpoint.url) for endpoint in given}
    if adds:
        wanted += [Endpoint(url=url, secure=url.startswith("https")) for url in voters if url not in known]
    if not wanted or wanted == current:
        return None
    gone = "no member's client URL (removed, or spelt otherwise)"
    lines = [
        f"etcd membership: {endpoint.url} is {'a learner' if _url(endpoint.url) in learners else gone}; no more load "
        "goes to it"
        for endpoint in current
        if endpoint not in wanted
    ]
    lines += [
        f"etcd membership: {endpoint.url} is a voting member; load goes to it"
        for endpoint in wanted
        if endpoint not in current
    ]
    return Change(wanted, lines)
