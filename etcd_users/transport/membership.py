"""Which endpoints take load as the cluster's membership changes (``--etcd-disrupt`` remove, promote, add-learner):
the voting members' client URLs among those given, and with ``add-learner`` (the tool's own etcd, grown by the tool)
the voting members it added. A learner and a removed member get none.

The pool reads etcd's MemberList every ``POLL_S``; a cluster whose members advertise none of the endpoints given as
their client URLs (a load balancer, DNS names for addresses) is not followed, and the pool says so once. An endpoint
given that no member advertises is a removed member, or one spelt otherwise than the member advertises it: no load.
The members a run shows (the web UI's table, ``listed``) follow the same list: a learner the tool added appears at
once, a removed member goes.
"""

from dataclasses import dataclass

from etcd_users.settings import Endpoint

POLL_S = 1.0
TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Listed:
    """A member as a run shows it: its client URL, and whether it is a learner."""

    url: str
    learner: bool


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


def listed(given: list[Endpoint], members, adds: bool) -> list[Listed]:
    """The members a run shows, as the pool follows them: the endpoints given that etcd lists (a learner too), in
    their order, then with ``adds`` the members the tool added (by their first client URL), in etcd's order. Without a
    list (``members`` None), or when the members advertise none of the endpoints given, the endpoints given."""
    if members is None or not followed(given, members):
        return [Listed(endpoint.url, False) for endpoint in given]
    learner_of = {_url(url): member.isLearner for member in members for url in member.clientURLs}
    shown = [Listed(e.url, learner_of[_url(e.url)]) for e in given if _url(e.url) in learner_of]
    if adds:
        known = {_url(endpoint.url) for endpoint in given}
        shown += [
            Listed(_url(member.clientURLs[0]), member.isLearner)
            for member in members
            if member.clientURLs and not known & {_url(url) for url in member.clientURLs}
        ]
    return shown
