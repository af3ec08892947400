"""The web UI's endpoints tab, its pure parts (``etcd_users.features.webui.endpoints_tab``): each member's role from its
own look-ups (a look-up that waits says at once that the member does not answer), where requests go as the users'
pool sends them, the members as the membership lists them, the leader changes since the run started; and each
member looked up on its own (``etcd_users.members.member_lookups``), a silent one never holding up another.
The tab against real members is ``tests/e2e/test_webui.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the tab looks members up in greenlets)

import argparse
import socket
import time

import gevent
from support import free_port

from etcd_users.core.features import OPTIONS
from etcd_users.features.webui.endpoints_tab import LEFT_OUT, EndpointsTab, PoolView, endpoint_rows, note_leader_changes
from etcd_users.members.member_lookups import ANSWER_DUE_S, Lookup, MemberLookups
from etcd_users.members.server_metrics import Scrape, Scraper
from etcd_users.settings import Endpoint, settings_from_options
from etcd_users.transport import learners
from etcd_users.transport.membership import Listed, listed

URLS = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
NOW = 1_000.0
FOLLOWER = Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_has_leader": 1.0})
LEADER = Scrape(values={"etcd_server_is_leader": 1.0, "etcd_server_leader_changes_seen_total": 3.0})


def make_settings(target: str = "round-robin", conns: int = 4):
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_endpoints = ",".join(URLS)
    namespace.etcd_target = target
    namespace.etcd_conns = conns
    return settings_from_options(namespace)


def answered(scrape: Scrape | str, seconds_ago: float = 1.0) -> Lookup:
    return Lookup(answer=scrape, answered_at=NOW - seconds_ago)


def rows(settings, lookups: list[Lookup], pool: PoolView | None = None, members=None, baselines=None) -> list[dict]:
    members = members or [Listed(url, False) for url in URLS]
    by_url = {member.url: lookup for member, lookup in zip(members, lookups, strict=True)}
    return endpoint_rows(settings, members, by_url, NOW, baselines, pool)


def test_rows_mark_the_leader_and_where_requests_go():
    leader_target = make_settings("leader")
    shown = rows(leader_target, [answered(FOLLOWER), answered(LEADER, 3.4), answered("no answer within 2s")])
    assert [(row["name"], row["role"], row["load"], row["checked"]) for row in shown] == [
        (URLS[0], "follower", "no", "1s ago"),
        (URLS[1], "leader", "yes", "3s ago"),
        (URLS[2], "not answering (no answer within 2s)", "no (does not answer)", "1s ago"),
    ]
    assert {row["conns"] for row in shown} == {4}
    lost = Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_has_leader": 0.0})
    shown = rows(make_settings(), [answered(lost), Lookup(), answered(LEADER)])
    assert [(row["role"], row["load"], row["checked"]) for row in shown] == [
        ("no leader", "yes (rotation)", "1s ago"),
        ("checking", "yes (rotation)", ""),
        ("leader", "yes (rotation)", "1s ago"),
    ]


def test_a_member_whose_look_up_waits_is_shown_as_not_answering_before_its_timeout():
    waiting = Lookup(answer=FOLLOWER, answered_at=NOW - 2.5, asked_at=NOW - ANSWER_DUE_S - 0.2)
    just_asked = Lookup(answer=FOLLOWER, answered_at=NOW - 1.0, asked_at=NOW - 0.1)
    shown = rows(make_settings(), [answered(LEADER), just_asked, waiting])
    assert [(row["role"], row["load"]) for row in shown] == [
        ("leader", "yes (rotation)"),
        ("follower", "yes (rotation)"),  # a look-up under way for a moment is no sign of anything
        (f"not answering (no answer for {ANSWER_DUE_S + 0.2:.1f}s)", "no (does not answer)"),
    ]
    assert shown[2]["checked"] == "2s ago" and shown[2]["leaderchanges"] == ""


def test_the_users_pool_says_where_requests_go_and_which_member_it_left_out():
    pool = PoolView(rotation=frozenset(URLS[:2]), leader=URLS[1], left_out={URLS[2]: NOW - 0.5})
    # the member answered /metrics before the pool found its Status unanswered, and not since
    shown = rows(make_settings(), [answered(FOLLOWER), answered(LEADER), answered(FOLLOWER, 1.0)], pool)
    assert [(row["role"], row["load"]) for row in shown] == [
        ("follower", "yes (rotation)"),
        ("leader", "yes (rotation)"),
        ("not answering (its Status went unanswered)", LEFT_OUT),
    ]
    # back: it answers /metrics again, and takes requests once the pool has looked again
    shown = rows(make_settings(), [answered(FOLLOWER), answered(LEADER), answered(FOLLOWER, 0.1)], pool)
    assert (shown[2]["role"], shown[2]["load"]) == ("follower", LEFT_OUT)
    leader_target = make_settings("leader")
    shown = rows(leader_target, [answered(FOLLOWER), answered(LEADER), answered(FOLLOWER)], pool._replace(left_out={}))
    assert [row["load"] for row in shown] == ["no", "yes", "no"]


def test_a_learner_is_listed_and_takes_no_requests():
    members = [*(Listed(url, False) for url in URLS), Listed("http://10.0.0.4:2379", True)]
    shown = rows(
        make_settings(), [answered(FOLLOWER), answered(LEADER), answered(FOLLOWER), answered(FOLLOWER)], None, members
    )
    assert (shown[3]["name"], shown[3]["role"], shown[3]["load"]) == ("http://10.0.0.4:2379", "learner", "no (learner)")


def test_leader_changes_count_from_the_run_s_start_not_the_first_election():
    def scrape(changes: float) -> Scrape:
        return Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_leader_changes_seen_total": changes})

    def shown(first: Scrape, baselines: dict[str, float]) -> list:
        lookups = [answered(first), answered(scrape(2.0)), answered("no answer within 2s")]
        return [row["leaderchanges"] for row in rows(make_settings(), lookups, baselines=baselines)]

    baselines: dict[str, float] = {}
    note_leader_changes(baselines, URLS[0], scrape(1.0))  # a fresh cluster: its first election
    assert baselines == {URLS[0]: 1.0}
    assert shown(scrape(1.0), baselines) == [0, "", ""]  # no baseline yet for the second: not counted yet
    note_leader_changes(baselines, URLS[0], scrape(3.0))  # the first keeps its baseline
    note_leader_changes(baselines, URLS[1], scrape(2.0))
    assert shown(scrape(3.0), baselines) == [2, 0, ""]
    note_leader_changes(baselines, URLS[0], scrape(1.0))  # the first member restarted: counts from there
    assert baselines == {URLS[0]: 1.0, URLS[1]: 2.0}


A, B, C, D = (Endpoint(url, False) for url in [*URLS, "http://10.0.0.4:2379"])


def test_the_members_shown_follow_the_membership_as_the_pool_does():
    def member(index: int, endpoint: Endpoint, learner: bool = False):
        return learners.Member(ID=index, clientURLs=[endpoint.url + "/"], isLearner=learner)

    given = [A, B, C]
    assert listed(given, None, adds=True) == [Listed(e.url, False) for e in given]  # no list yet: those given
    grown = [member(1, A), member(2, B), member(3, C), member(4, D, learner=True)]
    assert listed(given, grown, adds=True) == [*(Listed(e.url, False) for e in given), Listed(D.url, True)]
    assert listed(given, grown, adds=False) == [Listed(e.url, False) for e in given]  # not the tool's to show
    removed = [member(1, A), member(3, C), member(4, D)]
    assert listed(given, removed, adds=True) == [Listed(A.url, False), Listed(C.url, False), Listed(D.url, False)]
    elsewhere = [learners.Member(ID=9, clientURLs=["http://lb:2379"])]  # members that advertise none of those given
    assert listed(given, elsewhere, adds=True) == [Listed(e.url, False) for e in given]


def _silent_listener() -> socket.socket:
    """A frozen member, as far as a client can tell: the kernel accepts the connection, nothing ever answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


def _refused_url() -> str:
    """A URL where nothing listens: refused at once."""
    return f"http://127.0.0.1:{free_port()}/metrics"


def test_each_member_is_looked_up_on_its_own_and_a_silent_one_holds_up_no_other():
    listener = _silent_listener()
    silent = f"http://127.0.0.1:{listener.getsockname()[1]}/metrics"
    refused = _refused_url()
    lookups = MemberLookups(Scraper(timeout=60.0))  # longer than the test waits: the silent one never ends
    try:
        deadline = time.monotonic() + 30
        while True:
            seen = lookups.follow({"silent": silent, "refused": refused})
            if seen["refused"].answer is not None:
                break
            assert time.monotonic() < deadline, seen
            gevent.sleep(0.05)
        assert "refused" in seen["refused"].answer.lower(), seen["refused"]
        # the silent member's look-up still waits, and says so: no answer, and since when it was asked
        assert seen["silent"].answer is None and seen["silent"].asked_at is not None
        # a member that leaves the table is no longer looked up
        assert set(lookups.follow({"refused": refused})) == {"refused"}
        assert set(lookups.lookups) == {"refused"}
    finally:
        lookups.close()
        listener.close()


def test_after_quit_the_tab_keeps_its_last_rows_and_looks_nothing_up_again():
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_endpoints = _refused_url().removesuffix("/metrics")
    settings = settings_from_options(namespace)
    tab = EndpointsTab()
    try:
        deadline = time.monotonic() + 30
        while not (shown := tab.rows(settings))[0]["role"].startswith("not answering"):
            assert time.monotonic() < deadline, shown
            gevent.sleep(0.05)
        tab.quit()
        # another run's members after quit: the last rows still, no member of theirs looked up
        assert tab.rows(make_settings()) == shown
        assert [row["name"] for row in shown] == [namespace.etcd_endpoints]
    finally:
        tab.close()
