"""``partition``: a member of the local etcd cut off from its peers in the peer proxy, healed after DURATION, and what
the leadership did meanwhile, as the members' Status answers tell it: the leader before the cut, the one the other
members agreed on during it (and how long after the cut they first agreed on a new one), and the leader once every
member agrees again after the heal, with the raft terms.

``delay``: the round trip between a member and each of its peers made longer by RTT in the peer proxy, for DURATION,
and the leadership told the same way (every member counts during it: none is cut off).

Status is asked of every member every POLL_S on the master's own connections (a cut member still answers its
clients), so an election is seen to within a poll, from the cut to the first poll where the other members name the
same new leader.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import math
import time
from collections.abc import Callable, Iterator
from functools import partial

import gevent

from etcd_users.disruptions.actions import Done, agreed_leader, member_statuses, resolve
from etcd_users.local import LocalCluster
from etcd_users.round_trip import PeerRtt
from etcd_users.settings.disruption_schedule import Disruption
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import MemberStatus

POLL_S = 0.05
SETTLE_S = 10.0  # after the heal: until every member answers and names one leader
# how a window's leadership names its start, its end and the members whose leader counts during it
CUT = ("the cut", "the heal", "the others")
DELAYED = ("the delay", "its end", "the members")


def partition(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """Cut the member named (the leader, a follower or a client URL) off from its peers for the disruption's duration;
    healed when this returns, also when the greenlet is killed on the way (the run stops)."""
    _links_window(cluster, statuses, disruption, done, call, None)


def delay(cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call) -> None:
    """Add the disruption's round trip (``value``) to the links of the member named (the leader, a follower or a client
    URL) for its duration; back to the cluster's own when this returns, also when the greenlet is killed on the way."""
    _links_window(cluster, statuses, disruption, done, call, disruption.value)


def _links_window(
    cluster: LocalCluster, statuses: list[MemberStatus], disruption: Disruption, done: Done, call, rtt: PeerRtt | None
) -> None:
    """The member's peer links cut (``rtt`` None) or slowed by ``rtt`` for the disruption's duration, with the leaders
    before, during and after; the links are whole again when this returns, however it ends."""
    status = resolve(disruption.member, statuses)[0]
    url = status.endpoint.url
    index = cluster.endpoints.index(url)
    done.members = [url]
    leader = agreed_leader(statuses)
    before = leader.member_id if leader else None
    step = {"member": url, **({"rtt": str(rtt)} if rtt is not None else {})}
    step.update(leader_before=leader and leader.endpoint.url, term_before=_term(statuses))
    done.steps.append(step)
    if rtt is None:
        apply, undo, words = partial(cluster.blackhole_member, index), partial(cluster.heal_member, index), CUT
        what = f"{url} cut off from its peers"
    else:
        apply, undo, words = partial(cluster.delay_member, index, rtt), partial(cluster.undelay_member, index), DELAYED
        what = f"{url}'s round trip to its peers {rtt} longer"
    applied, watcher = False, None
    try:
        done.start()
        began = time.perf_counter()
        applied = True  # before the call: one interrupted while it waits for the proxy's answer may still take effect
        apply()
        # a cut member's own view of the leader does not count; a slowed one's does
        watcher = gevent.spawn(_leaders_during, call, status.member_id if rtt is None else None, before, began, step)
        gevent.sleep(disruption.duration)
        watcher.kill()
        back = time.perf_counter()
        undo()
        applied = False
        _leader_after(call, back, step)
        done.result = f"{what} for {back - began:.2f} s; {leadership(step, words)}"
    finally:
        if watcher is not None:  # the run stops: no poll outlives the master's connections
            watcher.kill()
        if applied:  # the links are whole before the clean-up and the local etcd's end
            undo()


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
    """Until killed: the leader the members other than the cut one (None: all of them) agree on, and when they first
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
    """The leadership of a partition's window (``CUT``) or a delay's (``DELAYED``) in a few words."""
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
