"""Where the pool sends each request, from the members' Status answers, without a member: the pool's ``status`` is
replaced by one that returns chosen answers and its connections by plain objects, then ``select`` runs on a fresh
event loop and ``next_connection`` is read as the users read it."""

import argparse
import asyncio
import logging
import re
from types import SimpleNamespace

import gevent
import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.settings import Endpoint, settings_from_options
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import Connection, EndpointPool, MemberStatus

URLS = ("http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379")
A, B, C = (Endpoint(url, secure=False) for url in URLS)


class FakeConnection:
    """A connection as the pool uses it in ``select``: its endpoint, and MemberList for the leader's URLs."""

    def __init__(self, endpoint: Endpoint, number: int, members: list) -> None:
        self.endpoint = endpoint
        self.number = number
        self.metadata = ()
        self.pending = 0  # no call waits on it: leaving its member out replaces no channel
        self.cluster = SimpleNamespace(MemberList=self._member_list)
        self._members = members

    async def _member_list(self, request, timeout, metadata):
        return SimpleNamespace(members=self._members)

    def __repr__(self) -> str:
        return f"{self.endpoint.url}#{self.number}"


def make_pool(
    target: str = "round-robin", conns: int = 2, urls=URLS, members: list = (), timeout: float = 5.0
) -> EndpointPool:
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_endpoints, namespace.etcd_target, namespace.etcd_conns = ",".join(urls), target, conns
    namespace.etcd_timeout = timeout
    pool = EndpointPool(settings_from_options(namespace))
    pool.connections = {
        endpoint: [FakeConnection(endpoint, number, list(members)) for number in range(conns)]
        for endpoint in pool.endpoints
    }
    return pool


def select(pool: EndpointPool, statuses: list[MemberStatus], timeout: float = 2.0) -> bool:
    """Run ``pool.select`` against ``statuses``; whether it scheduled a later look (its timer is cancelled)."""

    async def run() -> bool:
        async def status(timeout: float) -> list[MemberStatus]:
            return statuses

        pool.status = status
        try:
            await pool.select(timeout)
        finally:
            scheduled = pool._recheck is not None
            if scheduled:
                pool._recheck.cancel()
                pool._recheck = None
        return scheduled

    try:
        return asyncio.run(run())
    finally:
        pool._closed = True  # nothing may look again after the test


def alive(endpoint: Endpoint, member_id: int, leader_id: int | None = 1, term: int = 2) -> MemberStatus:
    return MemberStatus(endpoint, member_id, leader_id, term, "3.5.17", None)


def dead(endpoint: Endpoint, error: str = "UNAVAILABLE") -> MemberStatus:
    return MemberStatus(endpoint, None, None, 0, "", error)


def taken(pool: EndpointPool, count: int) -> list[str]:
    return [repr(pool.next_connection()) for _ in range(count)]


# -- round-robin --


def test_round_robin_interleaves_every_member_s_connections():
    pool = make_pool()
    assert not select(pool, [alive(A, 1), alive(B, 2), alive(C, 3)])
    assert taken(pool, 7) == [
        "http://10.0.0.1:2379#0",
        "http://10.0.0.2:2379#0",
        "http://10.0.0.3:2379#0",
        "http://10.0.0.1:2379#1",
        "http://10.0.0.2:2379#1",
        "http://10.0.0.3:2379#1",
        "http://10.0.0.1:2379#0",  # and round again
    ]
    assert pool.dead == frozenset()


def test_round_robin_skips_a_member_that_does_not_answer_and_uses_it_again_when_back(caplog):
    pool = make_pool()
    caplog.set_level(logging.INFO, logger="etcd_users.transport.pool")
    assert select(pool, [alive(A, 1), dead(B), alive(C, 3)])  # a dead member: a later look is scheduled
    assert taken(pool, 5) == [
        "http://10.0.0.1:2379#0",
        "http://10.0.0.3:2379#0",
        "http://10.0.0.1:2379#1",
        "http://10.0.0.3:2379#1",
        "http://10.0.0.1:2379#0",
    ]
    assert pool.dead == {B}
    assert "etcd endpoint http://10.0.0.2:2379 does not answer (UNAVAILABLE); skipping it" in caplog.messages

    pool._closed = False
    assert not select(pool, [alive(A, 1), alive(B, 2), alive(C, 3)])
    assert taken(pool, 3) == ["http://10.0.0.1:2379#0", "http://10.0.0.2:2379#0", "http://10.0.0.3:2379#0"]
    assert pool.dead == frozenset()
    assert any(
        re.fullmatch(r"etcd endpoint http://10\.0\.0\.2:2379 answers again; using it \(left out \d+\.\ds\)", message)
        for message in caplog.messages
    ), caplog.messages


# -- leader --


def test_leader_target_follows_the_member_the_newest_term_names(caplog):
    pool = make_pool("leader")
    caplog.set_level(logging.INFO, logger="etcd_users.transport.pool")
    # A is behind (term 6, still naming member 2); B and C are in term 7, whose leader is member 3 (C)
    assert not select(pool, [alive(A, 1, leader_id=2, term=6), alive(B, 2, 3, term=7), alive(C, 3, 3, term=7)])
    assert pool.leader == C
    assert taken(pool, 3) == ["http://10.0.0.3:2379#0", "http://10.0.0.3:2379#1", "http://10.0.0.3:2379#0"]
    assert "etcd leader: http://10.0.0.3:2379" in caplog.messages


def test_leader_target_leaves_out_dead_members():
    pool = make_pool("leader")
    assert select(pool, [dead(A), alive(B, 2, leader_id=2, term=3), alive(C, 3, leader_id=2, term=3)])
    assert pool.leader == B
    assert taken(pool, 2) == ["http://10.0.0.2:2379#0", "http://10.0.0.2:2379#1"]


# -- nothing to send to: one line each --


def test_no_member_answers():
    pool = make_pool()
    with pytest.raises(EndpointError) as raised:
        select(pool, [dead(A), dead(B, "DEADLINE_EXCEEDED"), dead(C, "UNAVAILABLE: failed to connect")])
    assert str(raised.value) == (
        "no etcd endpoint answered within 2s (http://10.0.0.1:2379: UNAVAILABLE; "
        "http://10.0.0.2:2379: DEADLINE_EXCEEDED; http://10.0.0.3:2379: UNAVAILABLE: failed to connect); "
        "check --etcd-endpoints, --etcd-cacert, --etcd-cert and --etcd-key (when etcd asks for a client certificate) "
        "and that etcd runs there"
    )


def test_a_leader_outside_the_endpoints_names_its_url_and_round_robin():
    outside = SimpleNamespace(ID=0xABC, clientURLs=["http://10.0.0.9:2379"])
    members = [SimpleNamespace(ID=1, clientURLs=[URLS[0]]), SimpleNamespace(ID=2, clientURLs=[URLS[1]]), outside]
    pool = make_pool("leader", urls=URLS[:2], members=members)
    with pytest.raises(EndpointError) as raised:
        select(pool, [alive(A, 1, leader_id=0xABC, term=4), alive(B, 2, leader_id=0xABC, term=4)])
    assert str(raised.value) == (
        "--etcd-target leader: the leader (member abc, http://10.0.0.9:2379) is not among --etcd-endpoints; "
        "add its client URL or use --etcd-target round-robin"
    )


def test_while_a_lost_leader_is_replaced_the_users_wait_for_the_new_one(caplog):
    members = [SimpleNamespace(ID=index + 1, clientURLs=[url]) for index, url in enumerate(URLS)]
    pool = make_pool("leader", members=members)
    caplog.set_level(logging.INFO, logger="etcd_users.transport.pool")
    assert select(pool, [alive(A, 1, leader_id=3, term=5), alive(B, 2, leader_id=3, term=5), dead(C)])
    assert pool.leader is None
    assert (
        "the etcd leader (member 3, http://10.0.0.3:2379) does not answer; waiting for a new one; "
        "requests wait for the new leader" in caplog.messages
    )

    # a user asking for a connection meanwhile waits until the members name the new leader, then gets it
    pool._closed = False
    waiting = gevent.spawn(pool.next_connection)
    gevent.sleep(0.05)
    assert not waiting.ready()
    select(pool, [alive(A, 1, leader_id=2, term=6), alive(B, 2, leader_id=2, term=6), dead(C)])
    assert pool.leader == B
    assert repr(waiting.get(timeout=1)) == "http://10.0.0.2:2379#0"
    assert taken(pool, 2) == ["http://10.0.0.2:2379#1", "http://10.0.0.2:2379#0"]


def test_with_no_new_leader_within_the_timeout_the_members_that_answer_take_the_request():
    members = [SimpleNamespace(ID=index + 1, clientURLs=[url]) for index, url in enumerate(URLS)]
    pool = make_pool("leader", members=members, timeout=0.1)
    select(pool, [alive(A, 1, leader_id=3, term=5), alive(B, 2, leader_id=3, term=5), dead(C)])
    assert taken(pool, 2) == ["http://10.0.0.1:2379#0", "http://10.0.0.2:2379#0"]


def test_a_cluster_without_a_leader_says_so():
    pool = make_pool("leader")
    with pytest.raises(EndpointError) as raised:
        select(pool, [alive(A, 1, leader_id=None), alive(B, 2, leader_id=None), alive(C, 3, leader_id=None)])
    assert str(raised.value) == "no etcd leader: the cluster has not elected one"


# -- a connection's calls, as the watchdog reads them --


class _Channel:
    """Enough of a channel for the stubs a Connection makes; no call goes through it."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def test_silence_is_counted_from_when_the_connection_became_busy():
    connection = Connection(A, _Channel())
    connection.answered_at = 0.0  # long idle
    first = connection.call_started()
    became_busy = connection.answered_at
    assert became_busy > 0.0 and connection.pending == 1
    connection.call_started()  # already busy: the silence goes on
    assert connection.answered_at == became_busy and connection.pending == 2
    assert connection.stalled(became_busy + 2.0, after=1.0)
    assert connection.call_ended(first, True, became_busy + 1.5)  # an answer ends it
    assert connection.answered_at == became_busy + 1.5 and connection.pending == 1
    assert not connection.stalled(became_busy + 2.0, after=1.0)


def test_only_an_answer_on_the_current_channel_counts():
    connection = Connection(A, _Channel())
    unanswered, abandoned, answered = (connection.call_started() for _ in range(3))
    busy_since = connection.answered_at
    assert connection.call_ended(unanswered, False, busy_since + 1.0)  # no answer (a deadline): still silent
    assert connection.answered_at == busy_since
    connection.generation += 1  # the pool replaced the channel under the calls left
    assert not connection.call_ended(abandoned, False, busy_since + 2.0)
    assert not connection.call_ended(answered, True, busy_since + 3.0)  # an answer on the old channel is not counted
    assert connection.answered_at == busy_since and connection.pending == 0


def test_a_call_counted_out_is_reported_by_what_became_of_it():
    connection = Connection(A, _Channel())
    cut_short, ran_out, in_time = (connection.call_started() for _ in range(3))
    connection.generation += 1  # the pool left the member out: the calls above were abandoned
    now = connection.answered_at + 2.0
    assert error_label(connection.call_finished(cut_short, asyncio.CancelledError(), 0.8, now, 2.0)) == "UNAVAILABLE"
    assert (
        error_label(connection.call_finished(ran_out, asyncio.CancelledError(), 2.0, now, 2.0)) == "DEADLINE_EXCEEDED"
    )
    current = connection.call_started()
    timed_out = asyncio.TimeoutError()
    assert connection.call_finished(current, timed_out, 2.0, now, 2.0) is timed_out  # on the channel in use: as it came
    assert connection.call_finished(in_time, None, 0.1, now, 2.0) is None
    assert connection.pending == 0
