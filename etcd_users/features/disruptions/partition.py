"""``partition``: a member of the local etcd cut off from its peers in the peer proxy, healed after DURATION, and what
the leadership did meanwhile, as the members' Status answers tell it: the leader before the cut, the one the other
members agreed on during it (and how long after the cut they first agreed on a new one), and the leader once every
member agrees again after the heal, with the raft terms.

``delay``: the round trip between a member and each of its peers made longer by RTT in the peer proxy, for DURATION,
and the leadership told the same way (every member counts during it: none is cut off).

``cut``: one way, what member A sends member B dropped in the peer proxy and what B sends A passed, for DURATION, as
etcd's robustness tests blackhole one direction of a member's traffic; the leadership told the same way (B's own view
does not count during it: it may hear no leader).

Status is asked of every member every POLL_S on the master's own connections (a cut member still answers its
clients), so an election is seen to within a poll, from the cut to the first poll where the other members name the
same new leader.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import math
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import NamedTuple

import gevent

from etcd_users.features.disruptions.actions import Done, agreed_leader, member_statuses, resolve, resolve_pair
from etcd_users.features.disruptions.schedule import Disruption
from etcd_users.local import LocalCluster
from etcd_users.settings.round_trip import PeerRtt
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import MemberStatus

POLL_S = 0.05
SETTLE_S = 10.0  # after the heal: until every member answers and names one leader
# how a window's leadership names its start, its end and the members whose leader counts during it
CUT = ("the cut", "the heal", "the others")
DELAYED = ("the delay", "its end", "the members")
ONE_WAY = ("the cut", "its end", "the others")


def partition(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """Cut the member named (the leader, a follower or a client URL) off from its peers for the disruption's duration;
    healed when this returns, also when the greenlet is killed on the way (the run stops)."""
    status = resolve(disruption.member, statuses)[0]
    url, index = _member(cluster, status)
    apply, undo = partial(cluster.blackhole_member, index), partial(cluster.heal_member, index)
    window = _Window(apply, undo, CUT, f"{url} cut off from its peers")
    # a cut member's own view of the leader does not count
    _links_window(statuses, disruption, done, call, window, [url], {"member": url}, status.member_id)


def delay(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """Add the disruption's round trip (``value``) to the links of the member named (the leader, a follower or a client
    URL) for its duration; back to the cluster's own when this returns, also when the greenlet is killed on the way."""
    rtt: PeerRtt = disruption.value
    status = resolve(disruption.member, statuses)[0]
    url, index = _member(cluster, status)
    apply, undo = partial(cluster.delay_member, index, rtt), partial(cluster.undelay_member, index)
    window = _Window(apply, undo, DELAYED, f"{url}'s round trip to its peers {rtt} longer")
    # a slowed member's view of the leader counts
    _links_window(statuses, disruption, done, call, window, [url], {"member": url, "rtt": str(rtt)}, None)


def cut(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """One way, for the disruption's duration: what the first member named (A of ``cut:A->B``) sends the second is
    dropped, what the second sends the first passes; mended when this returns, also when the greenlet is killed on the
    way."""
    source, target = resolve_pair(*disruption.members_named, statuses)
    (source_url, writer), (target_url, reader) = _member(cluster, source), _member(cluster, target)
    apply, undo = partial(cluster.cut_link, writer, reader), partial(cluster.mend_link, writer, reader)
    what = f"{source_url}'s messages to {target_url} dropped (its messages to {source_url} passed)"
    window = _Window(apply, undo, ONE_WAY, what)
    # the member that hears nothing from the other may lose its leader: its own view does not count
    step = {"member": source_url, "to": target_url}
    _links_window(statuses, disruption, done, call, window, [source_url, target_url], step, target.member_id)


class _Window(NamedTuple):
    """What a window does to the links (``apply``), how it undoes it, how its leadership is told, and what it did."""

    apply: Callable[[], None]
    undo: Callable[[], None]
    words: tuple[str, str, str]
    what: str


def _member(cluster: LocalCluster, status: MemberStatus) -> tuple[str, int]:
    """The member's client URL and its index in the local etcd."""
    url = status.endpoint.url
    return url, cluster.endpoints.index(url)


def _links_window(
    statuses: list[MemberStatus],
    disruption: Disruption,
    done: Done,
    call,
    window: _Window,
    members: list[str],
    step: dict,
    excluded: int | None,
) -> None:
    """The links cut or slowed for the disruption's duration, with the leaders before, during and after (during: as
    the members but ``excluded`` agree); the links are whole again when this returns, however it ends."""
    done.members = members
    leader = agreed_leader(statuses)
    before = leader.member_id if leader else None
    step.update(leader_before=leader and leader.endpoint.url, term_before=_term(statuses))
    done.steps.append(step)
    applied, watcher = False, None
    try:
        done.start()
        began = time.perf_counter()
        applied = True  # before the call: one interrupted while it waits for the proxy's answer may still take effect
        window.apply()
        watcher = gevent.spawn(_leaders_during, call, excluded, before, began, step)
        gevent.sleep(disruption.duration)
        watcher.kill()
        back = time.perf_counter()
        window.undo()
        applied = False
        _leader_after(call, back, step)
        done.result = f"{window.what} for {back - began:.2f} s; {leadership(step, window.words)}"
    finally:
        if watcher is not None:  # the run stops: no poll outlives the master's connections
            watcher.kill()
        if applied:  # the links are whole before the clean-up and the local etcd's end
            window.undo()


def _term(statuses: list[MemberStatus]) -> int | None:
    return max((s.raft_term for s in statuses if s.error is None), default=None)


def _polled_statuses(call: Callable, until: float = math.inf) -> Iterator[list[MemberStatus] | None]:
    """The members' Status answers every POLL_S, until ``until`` (``time.perf_counter``) or the caller stops; None for
    a poll no member answered. The run's end (RuntimeError from ``call``) reaches the caller."""
    while time.perf_counter() < until:
        try:
            statuses = call(member_statuses)
        except EndpointError:
            statuses = None
        yield statuses
        gevent.sleep(POLL_S)


def _leaders_during(call: Callable, cut_id: int | None, before: int | None, began: float, step: dict) -> None:
    """Until killed: the leader the members other than ``cut_id`` (None: all of them) agree on, and when they first
    agreed on a new one."""
    try:
        for statuses in _polled_statuses(call):
            if statuses is None:  # no member answers: the window keeps what it saw
                return
            others = [s for s in statuses if s.member_id != cut_id]
            leader = agreed_leader(others)
            if leader is not None:
                step["leader_during"], step["term_during"] = leader.endpoint.url, _term(others)
                if leader.member_id != before and "elected_after_s" not in step:
                    step["elected_after_s"] = round(time.perf_counter() - began, 3)
    except RuntimeError:  # the run stopped: the window keeps what it saw
        return


def _leader_after(call: Callable, healed: float, step: dict) -> None:
    """The leader once every member answers and names it, up to SETTLE_S after the heal."""
    for statuses in _polled_statuses(call, until=healed + SETTLE_S):
        if statuses is None:  # no member answers yet
            continue
        leader = agreed_leader(statuses)
        if leader is not None and all(s.error is None for s in statuses):
            step["leader_after"], step["term_after"] = leader.endpoint.url, _term(statuses)
            step["settled_after_s"] = round(time.perf_counter() - healed, 3)
            return


def leadership(step: dict, window: tuple[str, str, str] = CUT) -> str:
    """The leadership of a partition's window (``CUT``), a delay's (``DELAYED``) or a one-way cut's (``ONE_WAY``) in a
    few words."""
    start, end, counted = window
    before, during, after = step.get("leader_before"), step.get("leader_during"), step.get("leader_after")
    words = [f"leader {before or 'none agreed'} before (term {step.get('term_before')})"]
    if "elected_after_s" in step:
        words.append(f"{during} elected {step['elected_after_s']:.2f} s after {start} (term {step.get('term_during')})")
    elif during:
        words.append(f"{during} kept the lead during {start}")
    else:
        words.append(f"no leader agreed on by {counted} during {start}")
    if after:
        settled = step["settled_after_s"]
        words.append(f"{after} the leader {settled:.2f} s after {end} (term {step.get('term_after')})")
    else:
        words.append(f"no leader agreed on by every member {SETTLE_S:g} s after {end}")
    return ", ".join(words)
