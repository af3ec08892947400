"""The members' figures over a span and the member: gates, pure: hand-made rows of PREFIX_etcd_metrics.csv."""

import pytest

from etcd_users.judging.member_gates import judge_gate
from etcd_users.judging.sla_specs import READY_SETS, SlaError, member_gates, parse_gate, parse_gates, request_gates
from etcd_users.members.buckets import format_buckets, parse_buckets
from etcd_users.members.member_figures import member_figures, window_counters

INF = float("inf")
M1, M2 = "http://m1:2379", "http://m2:2379"


def row(timestamp, member, fsync, *, leader_changes=1, slow=0, db=1000, quota=10000, peers="", error=""):
    return {
        "Timestamp": f"{timestamp:.3f}",
        "Member": member,
        "LeaderChanges": leader_changes,
        "SlowApplies": slow,
        "DbSizeBytes": db,
        "QuotaBytes": quota,
        "FsyncBuckets": format_buckets(fsync),
        "BackendCommitBuckets": "",
        "PeerRttBuckets": peers,
        "SnapshotSaveBuckets": "",
        "Error": error,
    }


def test_buckets_round_trip_through_their_text():
    buckets = {0.001: 3, 0.002: 5, INF: 6}
    assert format_buckets(buckets) == "0.001=3;0.002=5;inf=6"
    assert parse_buckets(format_buckets(buckets)) == {"": buckets}
    two_peers = ";".join(format_buckets(buckets, peer) for peer in ("a1", "b2"))
    assert parse_buckets(two_peers) == {"a1": buckets, "b2": buckets}
    assert parse_buckets("") == {} and parse_buckets("garbled;x=y") == {}


def test_the_span_p99_comes_from_the_buckets_difference_and_the_worst_member_is_named():
    rows = [
        row(0, M1, {0.001: 0, 0.016: 0, INF: 0}, db=1000),
        row(0, M2, {0.001: 0, 0.016: 0, INF: 0}, db=1000),
        # the first interval: 100 fsyncs of M1 under 1 ms; M2 one slow one
        row(1, M1, {0.001: 100, 0.016: 100, INF: 100}, leader_changes=2, db=3000),
        row(1, M2, {0.001: 0, 0.016: 1, INF: 1}, slow=4, db=1500),
        row(2, M1, {0.001: 200, 0.016: 200, INF: 200}, leader_changes=2, db=2000),
        row(2, M2, {0.001: 99, 0.016: 100, INF: 100}, slow=5, db=9000),
    ]
    figures = member_figures(rows)
    # M2 over the span: 99 under 1 ms, 1 in (1, 16] ms: rank 99 of 100 falls at the top of the first bucket
    assert figures.figures["fsync_p99_ms"].value == pytest.approx(1.0)
    assert figures.figures["fsync_p99_ms"].member == M2
    assert figures.figures["leader_changes"] == (1.0, M1)
    assert figures.figures["slow_applies"] == (5.0, M2)
    assert figures.figures["db_growth_bytes"] == (8000.0, M2)
    assert figures.figures["db_quota_pct"] == (90.0, M2)
    assert figures.figures["peer_rtt_p99_ms"] == (None, None) and not figures.peers
    # the second interval alone: M2's one slow fsync is before it
    later = member_figures(rows, start=1, end=2)
    assert later.figures["fsync_p99_ms"].value == pytest.approx(0.99)
    assert later.figures["slow_applies"] == (1.0, M2)


def test_the_worst_peer_counts_and_a_restart_counts_from_zero():
    slow = {0.1: 0, 0.2: 10, INF: 10}
    fast = {0.1: 10, 0.2: 10, INF: 10}
    empty = {0.1: 0, 0.2: 0, INF: 0}
    peers = lambda a, b: ";".join([format_buckets(a, "p1"), format_buckets(b, "p2")])  # noqa: E731
    rows = [
        row(0, M1, {INF: 0}, peers=peers(empty, empty), leader_changes=5),
        row(1, M1, {INF: 0}, peers=peers(fast, slow), leader_changes=1),  # restarted: counters went back
    ]
    figures = member_figures(rows)
    assert figures.peers
    assert figures.figures["peer_rtt_p99_ms"].value == pytest.approx(199.0)
    assert figures.figures["leader_changes"].value == 1.0


def test_error_rows_and_single_scrapes_give_no_figure():
    assert not member_figures([row(0, M1, {INF: 0}, error="connection refused")]).scraped
    one = member_figures([row(0, M1, {INF: 0})])
    assert one.scraped and one.figures["leader_changes"] == (None, None)
    assert one.figures["db_quota_pct"].value == 10.0  # a size against its quota needs one scrape only


def test_older_files_fall_back_to_the_worst_interval():
    old = [{"Timestamp": "0", "Member": M1, "FsyncP99Ms": "9", "Error": ""}]
    old += [{"Timestamp": "1", "Member": M1, "FsyncP99Ms": "3", "Error": ""}]
    old += [{"Timestamp": "2", "Member": M1, "FsyncP99Ms": "4.5", "Error": ""}]
    assert member_figures(old).figures["fsync_p99_ms"].value == 4.5  # the first row's interval began before


# -- the grammar and the verdicts -------------------------------------------------------------------------------


def test_member_gates_parse_apart_from_the_request_gates():
    gates = parse_gates("put:p99<20ms,member:fsync_p99<10ms,member:db_quota<=80%,member:leader_changes<1")
    assert [gate.text for gate in request_gates(gates)] == ["put:p99<20ms"]
    assert [(gate.metric, gate.threshold, gate.unit) for gate in member_gates(gates)] == [
        ("fsync_p99", 10.0, "ms"),
        ("db_quota", 80.0, "%"),
        ("leader_changes", 1.0, ""),
    ]
    assert parse_gate("member:commit_p99<25ms").label == "member commit_p99"


def test_the_ready_set_expands_to_its_gates():
    gates = parse_gates("kubernetes-etcd,put:p99<20ms")
    assert [gate.text for gate in gates] == [*READY_SETS["kubernetes-etcd"], "put:p99<20ms"]
    assert [gate.text for gate in gates][:3] == [
        "member:fsync_p99<10ms",
        "member:peer_rtt_p99<100ms",
        "member:leader_changes<1",
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("member:fsync<10ms", "has an unknown metric 'fsync' (member: takes fsync_p99, commit_p99, peer_rtt_p99"),
        ("member:fsync_p99<10", "has no unit (fsync_p99 takes us, ms or s)"),
        ("member:leader_changes<1ms", "has the unit 'ms' (leader_changes takes no unit (a count))"),
        ("member:db_quota<80", "has no unit (db_quota takes % (of the quota))"),
        ("member:db_quota<120%", "asks for more than 100% of the quota"),
        ("member:p99", "is not a gate"),
    ],
)
def test_a_wrong_member_gate_is_one_line_listing_what_is_accepted(text, why):
    with pytest.raises(SlaError) as raised:
        parse_gates(text)
    message = str(raised.value)
    assert message.startswith(f"--etcd-sla: '{text}' {why}"), message
    assert "\n" not in message and "member:fsync_p99<10ms" in message


def test_member_gate_verdicts():
    rows = [row(0, M1, {0.001: 0, INF: 0}), row(1, M1, {0.001: 0, 0.016: 10, INF: 10})]
    figures = member_figures(rows)
    below = judge_gate(parse_gate("member:fsync_p99<5ms"), figures)
    above = judge_gate(parse_gate("member:fsync_p99<20ms"), figures)
    assert (below.passed, above.passed) == (False, True)
    assert below.measured == pytest.approx(15.85) and below.shown == f"15.850ms ({M1})"
    assert judge_gate(parse_gate("member:peer_rtt_p99<100ms"), figures).shown == "no peers (one member)"
    nothing = member_figures([row(0, M1, {INF: 0}, error="refused")])
    failed = judge_gate(parse_gate("member:fsync_p99<5ms"), nothing)
    assert not failed.passed and failed.shown.startswith("no figure")


def _scrape(member: str, at: float, leader_changes: float, failed: float, error: str = "") -> dict:
    return {
        "Member": member,
        "Timestamp": at,
        "Error": error,
        "LeaderChanges": leader_changes,
        "ProposalsFailed": failed,
    }


def test_a_window_s_counters_span_the_scrapes_around_it_and_name_the_worst_member():
    rows = [
        *(_scrape("a", at, changes, failed) for at, changes, failed in ((0, 1, 0), (5, 1, 0), (10, 2, 7), (15, 2, 7))),
        *(_scrape("b", at, changes, failed) for at, changes, failed in ((0, 1, 0), (5, 1, 3), (10, 3, 3))),
        _scrape("c", 4, 1, 0),
        _scrape("c", 11, 0, 0),  # c restarted in the window: its counters went back, not counted
        _scrape("d", 12, 0, 0, error="UNAVAILABLE"),
    ]
    assert window_counters(rows, 16.0, 20.0) is None  # no member scraped after its end yet
    counted = window_counters(rows, 6.0, 11.0)  # a from 5 s to 15 s; b not scraped after 10 s
    assert counted["leader_changes"].to_dict() == {"value": 1.0, "member": "a"}
    assert counted["proposals_failed"].to_dict() == {"value": 7.0, "member": "a"}
    counted = window_counters(rows, 5.0, 10.0)  # b from 5 s to 10 s: 2 changes, none failed
    assert counted["leader_changes"].to_dict() == {"value": 2.0, "member": "b"}
    assert counted["proposals_failed"].to_dict() == {"value": 7.0, "member": "a"}
