"""The audit's arithmetic: the ledger of acknowledged writes, its reading back, and the verdict across processes."""

import xml.etree.ElementTree as ET

import pytest

from etcd_users.audit_trail.ledger import KeyCounts, Ledger
from etcd_users.features.audit.evidence import timeline
from etcd_users.features.audit.verdict import AUDIT_EXIT_CODE, Audit, Hashes, MemberHash, ProcessAudit
from etcd_users.judging import junit
from etcd_users.transport.watch_counts import WatchCounts

PREFIX = b"/t/"


def key(index: int) -> bytes:
    return PREFIX + b"%05d" % index


def ledger(size: int = 100) -> Ledger:
    return Ledger(PREFIX, len(key(0)), size)


def test_a_key_of_the_key_space_is_its_counter_and_any_other_key_is_not_kept():
    book = ledger()
    assert book.index(key(0)) == 0 and book.index(key(99)) == 99
    for other in (key(100), PREFIX + b"-0001", PREFIX + b" 0001", PREFIX + b"0_001", PREFIX + b"001", b"/t/abcde"):
        assert book.index(other) == -1, other
    book.put(PREFIX + b"x", 5)
    assert (book.writes, book.unaudited) == (0, 1)


def test_the_latest_acknowledged_write_is_kept_whatever_order_the_responses_come_in():
    book = ledger()
    book.put(key(1), 10)
    book.put(key(1), 7)  # a slower response of an earlier put
    book.delete(key(2), 12)
    book.put(key(2), 11)
    assert (book.latest[1], book.latest[2]) == (10 << 1, 12 << 1 | 1)
    assert (book.writes, book.deletes) == (4, 1)
    assert book.bytes_per_key() == 8


def test_reading_back_finds_stale_vanished_and_later_keys():
    book = ledger()
    book.put(key(1), 10)  # present at 10: kept
    book.put(key(2), 11)  # present at 15 (another writer's later put): kept
    book.put(key(3), 12)  # present at 9, older than acknowledged: lost
    book.put(key(4), 13)  # absent, never deleted here: vanished
    book.delete(key(5), 14)  # absent: deleted
    book.delete(key(6), 15)  # back at 20 (a later put): kept
    book.delete(key(7), 16)  # present at 8, older than the delete: lost
    book.put(key(8), 40)  # after the read's revision: not judged
    counts = book.check(30, {1: 10, 2: 15, 3: 9, 6: 20, 7: 8})
    lost_keys = counts.lost_keys
    counts.lost_keys = []
    assert counts == KeyCounts(writes=8, keys=7, stale=2, vanished=1, later=1, deletes=3)
    assert counts.lost == 3
    # each lost key whole, for the evidence file: its acknowledged write and what the read back found
    assert [(k["key"], k["acknowledged"], k["acknowledged_revision"], k["found_mod_revision"]) for k in lost_keys] == [
        (key(3).decode(), "put", 12, 9),
        (key(4).decode(), "put", 13, None),
        (key(7).decode(), "delete", 16, 8),
    ]
    assert {k["judged"] for k in lost_keys[::2]} == {"stale"} and lost_keys[1]["judged"] == "vanished"
    assert {k["read_revision"] for k in lost_keys} == {30}


def test_a_key_gone_after_a_delete_whose_answer_never_came_is_doubtful_not_lost():
    book = ledger()
    for index in (1, 2, 3):
        book.put(key(index), 10 + index)
    failed = book.delete_sent(key(1))
    book.delete_sent(key(2))  # cut short: the user stopped while it waited
    answered = book.delete_sent(key(3))
    book.delete_answered(failed, key(1), None)
    book.delete_answered(answered, key(3), 20)
    counts = book.check(30, {})
    assert (counts.doubtful, counts.vanished, counts.lost, counts.deletes, book.in_flight) == (2, 0, 0, 1, {2: 1})
    assert Audit([ProcessAudit("local", counts)]).unexplained == 2


def test_a_process_that_deleted_ranges_does_not_count_its_vanished_keys_as_lost():
    book = ledger()
    book.put(key(1), 10)
    book.untracked_delete()
    counts = book.check(30, {})
    assert (counts.vanished, counts.untracked_deletes, counts.lost) == (1, True, 0)


def test_a_key_space_too_large_for_an_array_keeps_the_keys_written_in_a_dict(monkeypatch):
    monkeypatch.setattr("etcd_users.audit_trail.ledger.ARRAY_KEYS_MAX", 10)
    book = ledger(100)
    book.put(key(50), 3)
    assert dict(book.latest) == {50: 6}
    assert book.check(5, {}).vanished == 1


def process(name: str, stale=0, vanished=0, deletes=0, writes=10) -> ProcessAudit:
    return ProcessAudit(name, KeyCounts(writes=writes, keys=writes, stale=stale, vanished=vanished, deletes=deletes))


def test_keys_gone_count_as_lost_only_when_no_other_process_of_the_run_deleted_keys():
    alone = Audit([process("a", stale=1, vanished=2, deletes=5), process("b", vanished=3)])
    # b's 3 may be a's deletes; a's 2 cannot be b's, which deleted nothing
    assert (alone.lost, alone.unexplained, alone.writes) == (1 + 2, 3, 20)
    assert Audit([process("a", vanished=2)]).lost == 2


def hashes(*values: int, compact=(1, 1, 1)) -> Hashes:
    members = tuple(MemberHash(f"127.0.0.1:{2379 + i}", value, compact[i]) for i, value in enumerate(values))
    return Hashes(1204551, members)


def test_the_line_of_a_clean_run():
    watches = WatchCounts(watchers=4, in_order=3120556)
    audit = Audit([ProcessAudit("local", KeyCounts(writes=1183204, keys=9000), watches)], hashes(7, 7, 7))
    assert not audit.failed
    assert audit.line() == (
        "audit: 3 members' HashKV equal at rev 1204551; 1,183,204 acknowledged writes, 0 lost; "
        "3,120,556 watch events in order, 0 missed, 0 repeated, 0 out of order, 0 split, 0 behind a progress "
        "notification"
    )
    assert audit.as_json()["exit_code"] == 0 and audit.error_lines() == []


def test_hashes_that_differ_fail_and_name_the_members():
    audit = Audit([process("local")], hashes(7, 7, 9))
    assert audit.failed and audit.as_json()["exit_code"] == AUDIT_EXIT_CODE == 4
    assert audit.line().startswith("audit FAILED: 3 members' HashKV DIFFER at rev 1204551;")
    assert audit.error_lines()[1:] == [
        "audit: HashKV differs at rev 1204551 (compact rev 1): "
        "127.0.0.1:2379 0x00000007, 127.0.0.1:2380 0x00000007, 127.0.0.1:2381 0x00000009"
    ]
    assert audit.error_lines()[0].startswith("audit: the members at rev 1204551: 127.0.0.1:2379 rev 0 hash 0x00000007")


def diverged_members(version: str = "3.5.1") -> Hashes:
    """What etcdctl showed after a follower of 3.5.1 was killed under load: one raft applied index, two revisions."""
    return Hashes(
        40625,
        (
            MemberHash("127.0.0.1:2379", 0x1B2C3D4E, 1, None, 40626, 40671, version),
            MemberHash("127.0.0.1:2381", 0x1B2C3D4E, 1, None, 40626, 40671, version),
            MemberHash("127.0.0.1:2383", 0x99887766, 1, None, 40625, 40671, version),
        ),
    )


def test_members_that_applied_the_same_entries_to_different_revisions_diverged_and_name_the_known_bug():
    audit = Audit([process("local")], diverged_members())
    assert audit.failed and audit.as_json()["exit_code"] == 4
    line = audit.line()
    assert line.startswith(
        "audit FAILED: 3 members' data DIVERGED: the same raft applied index 40671 at different revisions "
        "(127.0.0.1:2379 rev 40626, 127.0.0.1:2381 rev 40626, 127.0.0.1:2383 rev 40625); HashKV DIFFER at rev 40625;"
    ), line
    assert line.endswith("; etcd 3.5.1: known bugs #13766, #13514"), line
    known = "audit: etcd 3.5.1 has a known bug: a member killed under load can skip an applied entry, and its data"
    fixed = "(etcd issue #13766, fixed in 3.5.3)"
    assert any(line.startswith(known) and line.endswith(fixed) for line in audit.error_lines())
    record = audit.as_json()
    assert record["hashkv"]["diverged"] == ["127.0.0.1:2379", "127.0.0.1:2381", "127.0.0.1:2383"]
    assert any("127.0.0.1:2383 rev 40625 applied 40671 hash 0x99887766" in e for e in audit.error_lines())
    # a version without the bug is not blamed on one
    assert "known bug" not in Audit([process("local")], diverged_members("3.5.3")).line()


def test_a_comparison_that_could_not_be_made_fails_and_says_why():
    for partial, why in (
        (hashes(7, 9, 7, compact=(1, 5, 1)), "compact revisions differ: 127.0.0.1:2379 1, 127.0.0.1:2380 5"),
        (
            Hashes(5, (MemberHash("a:1", 7, 1), MemberHash("b:1", None, 0, "DEADLINE_EXCEEDED"))),
            "b:1: DEADLINE_EXCEEDED",
        ),
    ):
        audit = Audit([process("local")], partial)
        assert audit.failed, partial
        assert "HashKV not compared" in audit.line() and why in audit.line(), audit.line()
        assert any(line.startswith("audit: could not be checked: HashKV not compared") for line in audit.error_lines())
    unhashed = Audit([process("local")], None, hash_error="etcd endpoints unreachable")
    assert unhashed.failed and unhashed.line().startswith("audit FAILED: HashKV not compared (etcd endpoints")


def test_a_member_still_down_after_the_wait_is_named_and_fails_the_audit_though_the_others_compared():
    members = (MemberHash("a:1", 7, 1), MemberHash("b:1", None, 0, "UNAVAILABLE"), MemberHash("c:1", 7, 1))
    audit = Audit([process("local")], Hashes(9, members, waited=30.02))
    assert audit.failed and audit.as_json()["exit_code"] == 4
    assert audit.line().startswith(
        "audit FAILED: 2 of 3 members' HashKV equal at rev 9; not compared: b:1 down for 30 s: UNAVAILABLE;"
    ), audit.line()
    assert "audit: could not be checked: HashKV not compared: b:1 down for 30 s: UNAVAILABLE" in audit.error_lines()
    record = audit.as_json()["hashkv"]
    assert (record["not_compared"], record["waited_s"]) == (["b:1"], 30.02)
    # one that went silent after the members all answered is named without a time it was not seen down for
    late = Audit([process("local")], Hashes(9, members, waited=0.4))
    assert late.failed and "; not compared: b:1: UNAVAILABLE;" in late.line(), late.line()
    # every member answered: the same three pass
    answered = (members[0], MemberHash("b:1", 7, 1), members[2])
    assert not Audit([process("local")], Hashes(9, answered, waited=3.0)).failed


def test_keys_that_etcd_would_not_read_back_fail_the_audit_and_a_lost_worker_is_said():
    refused = ProcessAudit("local", KeyCounts(writes=62764), error="mvcc: required revision is a future revision")
    audit = Audit([refused], hashes(7, 7, 7))
    assert audit.failed and audit.writes == 62764
    assert audit.line() == (
        "audit FAILED: 3 members' HashKV equal at rev 1204551; 62,764 acknowledged writes, 0 lost; "
        "not read back: local: mvcc: required revision is a future revision"
    )
    assert "audit: could not be checked: local's keys not read back: mvcc: required revision" in audit.error_lines()[0]
    # a lost worker fails the workers' gate (exit code 3); what the others wrote was checked
    silent_worker = Audit([process("w1")], hashes(7, 7, 7), missing=1)
    assert not silent_worker.failed and "not read back: 1 process sent no counts" in silent_worker.line()


def test_hashes_a_user_without_the_root_role_may_not_ask_for_are_said_and_do_not_fail():
    denied = "auth: permission denied"
    forbidden = Hashes(5, (MemberHash("a:1", None, 0, denied), MemberHash("b:1", None, 0, denied)))
    audit = Audit([process("local")], forbidden)
    assert not audit.failed
    assert audit.line().startswith("audit: HashKV not compared (auth: permission denied: only etcd's root role may")


def test_lost_writes_and_missed_watch_events_fail():
    lost = Audit([process("local", vanished=10)], hashes(1))
    assert lost.failed
    assert lost.line() == "audit FAILED: 1 member's HashKV equal at rev 1204551; 10 acknowledged writes, 10 lost"
    missed = Audit([ProcessAudit("local", watches=WatchCounts(watchers=2, in_order=5, missed=1))], hashes(1))
    assert missed.failed and "1 acknowledged puts not delivered" in missed.error_lines()[0]


@pytest.mark.parametrize("guarantee", ["repeated", "disordered", "split", "ahead", "prev_kv_wrong"])
def test_each_watch_guarantee_broken_fails_the_audit_with_its_count(guarantee):
    watches = WatchCounts(watchers=2, in_order=5, prev_kv_checked=5 * (guarantee == "prev_kv_wrong"), **{guarantee: 3})
    audit = Audit([ProcessAudit("local", watches=watches)], hashes(1))
    assert audit.failed and audit.as_json()["exit_code"] == 4
    assert audit.as_json()["processes"][0]["watches"][guarantee] == 3
    shown = {
        **{"repeated": "3 repeated", "disordered": "3 out of order", "split": "3 split", "ahead": "3 behind a"},
        "prev_kv_wrong": "3 of 5 prevKV wrong",
    }
    assert shown[guarantee] in audit.line()
    told = {
        "repeated": "3 events delivered twice",
        "disordered": "3 below the watcher's previous revision",
        "split": "3 responses that split a revision's events",
        "ahead": "3 events after a progress notification at or above their revision",
        "prev_kv_wrong": "3 prevKVs not the version or value delivered before",
    }
    assert told[guarantee] in audit.error_lines()[0]


def test_a_worker_s_report_comes_back_whole():
    sent = ProcessAudit("w1", KeyCounts(writes=3, keys=2), WatchCounts(watchers=1, in_order=4), 17, 0.25, 8.0)
    assert ProcessAudit.from_report(sent.to_report()) == sent


def test_the_audit_is_added_to_the_junit_report(tmp_path):
    path = tmp_path / "junit.xml"
    junit.write(str(path), junit.report((), ()))
    assert junit.add_case(str(path), "audit", "audit", "audit FAILED: …", "audit: 10 lost", [("lost", "10")])
    suite = ET.parse(path).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    case = suite.find("testcase")
    assert case.get("classname") == "audit" and case.find("failure").get("message") == "audit: 10 lost"


def test_the_evidence_page_gives_each_event_of_a_key_once_with_the_members_that_have_it():
    put = {"revision": 205, "type": "put", "version": 1}
    answer = {"mod_revision": 205, "create_revision": 205, "version": 1, "member_revision": 400}
    members = {
        "http://a": {"at_write": answer, "now": {"absent": True, "member_revision": 400}},
        "http://b": {"at_write": answer, "now": {"absent": True, "member_revision": 400}},
        "http://c": {"at_write": answer, "now": {**answer, "member_revision": 390}},
    }
    members["http://a"]["history"] = {"events": [put, {"revision": 345, "type": "delete", "version": 0}]}
    members["http://b"]["history"] = {"events": [put, {"revision": 345, "type": "delete", "version": 0}]}
    members["http://c"]["history"] = {"compacted_at": 300, "events": []}
    lost = {
        "key": "/k",
        "acknowledged": "put",
        "acknowledged_revision": 205,
        "found_mod_revision": None,
        "read_revision": 400,
        "judged": "vanished",
        "members": members,
    }
    page = timeline({"lost": [lost]})
    rows = page.split("<h3>/k</h3>", 1)[1]
    # a and b hold the put and the delete, c's history starts at its compaction and holds neither: not "every member"
    assert "<td>205</td><td>http://a, http://b</td><td>put, version 1 at rev 205</td>" in rows
    assert "<td>345</td><td>http://a, http://b</td><td>deleted at rev 345</td>" in rows
    assert "<td>300</td><td>http://c</td><td>history compacted: its events from rev 300</td>" in rows
    members["http://c"]["history"] = {"events": [put, {"revision": 345, "type": "delete", "version": 0}]}
    assert "<td>345</td><td>every member</td><td>deleted at rev 345</td>" in timeline({"lost": [lost]})
