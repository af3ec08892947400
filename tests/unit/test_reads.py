"""Reads judged against acknowledged writes: linearizability violations, the staleness of serializable reads, their
merge across processes, the audit's verdict and the stale: gates."""

import re

import pytest
from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users.audit_trail.acknowledged import AcknowledgedWrites
from etcd_users.audit_trail.ledger import Ledger
from etcd_users.audit_trail.reads import EVIDENCE_KEPT, ReadChecks, ReadCounts
from etcd_users.audit_trail.staleness import Staleness
from etcd_users.features.audit.verdict import AUDIT_EXIT_CODE, Audit, Hashes, MemberHash, ProcessAudit
from etcd_users.features.gates import stale_gates
from etcd_users.judging.sla_specs import SlaError, parse_gates, request_gates

MEMBER = "127.0.0.1:2379"
NAME = "range/linearizable"


def _answer(revision: int, *mod_revisions: int) -> rpc_pb2.RangeResponse:
    kvs = [kv_pb2.KeyValue(key=b"/k/1", mod_revision=mod) for mod in mod_revisions]
    return rpc_pb2.RangeResponse(header=rpc_pb2.ResponseHeader(revision=revision), kvs=kvs)


def _equal_hashes() -> Hashes:
    return Hashes(10, (MemberHash(MEMBER, 0x1234, 1, revision=10, applied_index=20),))


def test_the_recent_writes_keep_only_revisions_that_rise_and_find_the_earliest_write_above():
    writes = AcknowledgedWrites(window=60.0)
    for revision, at in ((5, 1.0), (7, 2.0), (6, 2.5), (9, 3.0)):
        writes.acknowledged(revision, at)
    assert writes.newest == 9
    assert writes.first_above(4) == (5, 1.0)
    assert writes.first_above(6) == (7, 2.0)  # 6 came later than 7: 7 is the earliest above 6
    assert writes.first_above(9) is None


def test_writes_older_than_the_window_are_trimmed():
    writes = AcknowledgedWrites(window=10.0)
    for second in range(100):
        writes.acknowledged(second + 1, float(second))
    assert writes.first_above(0) == (90, 89.0)  # revisions 1..89 acknowledged more than 10 s before the last


def test_a_read_served_below_a_revision_acknowledged_before_it_was_sent_is_a_violation_with_its_evidence():
    checks = ReadChecks()
    checks.writes.acknowledged(12, 100.0)
    checks.linearizable(100.5, checks.writes.newest, 0, _answer(11), b"/k/1", MEMBER, NAME)
    counts = checks.counts
    assert counts.checked == 1 and counts.violated == 1
    assert counts.violations == {MEMBER: {NAME: 1}}
    evidence = counts.evidence[0]
    assert (evidence["write_revision"], evidence["read_revision"], evidence["member"]) == (12, 11, MEMBER)
    assert abs(evidence["read_sent_at"] - evidence["write_acknowledged_at"] - 0.5) < 1e-3


def test_a_key_older_than_its_acknowledged_write_is_a_violation_and_a_later_or_absent_one_is_not():
    ledger = Ledger(b"/k/", 4, 10)
    ledger.put(b"/k/1", 8)
    checks = ReadChecks()
    checks.writes.acknowledged(8, 1.0)
    mark = ledger.mark(b"/k/1")
    checks.linearizable(2.0, 8, mark, _answer(9, 9), b"/k/1", MEMBER, NAME)  # rewritten by another client: legal
    checks.linearizable(2.0, 8, mark, _answer(9), b"/k/1", MEMBER, NAME)  # deleted by another client: not judged
    assert checks.counts.violated == 0
    checks.linearizable(2.0, 8, mark, _answer(9, 7), b"/k/1", MEMBER, NAME)
    assert checks.counts.checked == 3 and checks.counts.violated == 1
    assert checks.counts.evidence[0]["reason"] == "key older than its acknowledged write"
    ledger.delete(b"/k/1", 10)
    checks.linearizable(2.0, 10, ledger.mark(b"/k/1"), _answer(10, 8), b"/k/1", MEMBER, NAME)
    assert checks.counts.evidence[1]["reason"] == "deleted key still present"


def test_a_read_sent_before_a_write_was_acknowledged_is_not_judged_against_it():
    checks = ReadChecks()
    newest_at_send = checks.writes.newest  # 0: nothing acknowledged yet
    checks.writes.acknowledged(20, 1.0)  # acknowledged while the read was in flight
    checks.linearizable(0.5, newest_at_send, 0, _answer(19), b"/k/1", MEMBER, NAME)
    assert checks.counts.violated == 0


def test_only_the_first_pieces_of_evidence_are_kept_and_the_rest_counted():
    checks = ReadChecks()
    checks.writes.acknowledged(5, 1.0)
    for _ in range(EVIDENCE_KEPT + 20):
        checks.linearizable(2.0, 5, 0, _answer(4), b"/k/1", MEMBER, NAME)
    assert checks.counts.violated == EVIDENCE_KEPT + 20 and len(checks.counts.evidence) == EVIDENCE_KEPT


def test_a_serializable_read_is_behind_by_revisions_and_by_the_time_since_the_first_write_it_missed():
    checks = ReadChecks()
    checks.writes.acknowledged(10, 1.0)
    checks.writes.acknowledged(11, 1.5)
    checks.writes.acknowledged(14, 2.0)
    checks.serializable(3.0, 14, 10, "b")  # missed 11 (acknowledged at 1.5) and 14: 4 revisions, 1.5 s
    checks.serializable(3.0, 14, 14, "a")
    checks.serializable(3.0, 14, 16, "a")  # ahead of what this process knew: 0
    rows = {row["member"]: row for row in checks.staleness.rows()}
    assert rows["b"]["revisions_max"] == 4 and 1499.0 <= rows["b"]["ms_p99"] <= 1501.0  # HDR: 3 significant figures
    assert (rows["a"]["reads"], rows["a"]["revisions_max"], rows["a"]["ms_max"]) == (2, 0, 0.0)


def test_staleness_and_read_counts_merge_across_processes_through_their_reports():
    first, second = ReadChecks(), ReadChecks()
    for checks, behind in ((first, 0.2), (second, 2.0)):
        checks.writes.acknowledged(100, 10.0)
        checks.serializable(10.0 + behind, 100, 50, MEMBER)
        checks.linearizable(11.0, 100, 0, _answer(100), b"/k/1", MEMBER, NAME)
    second.linearizable(11.0, 100, 0, _answer(99), b"/k/1", MEMBER, NAME)
    processes = [
        ProcessAudit.from_report(
            ProcessAudit(name, reads=checks.counts, staleness=checks.staleness.to_report(), revision=1).to_report()
        )
        for name, checks in (("w1", first), ("w2", second))
    ]
    audit = Audit(processes, hashes=_equal_hashes())
    assert (audit.reads.checked, audit.reads.violated) == (3, 1)
    (row,) = audit.staleness().rows()
    assert row["reads"] == 2 and 1990.0 <= row["ms_max"] <= 2010.0 and row["revisions_max"] == 50
    merged = ReadCounts()
    merged.add(processes[0].reads)
    merged.add(processes[1].reads)
    assert merged.violations == {MEMBER: {NAME: 1}}


def test_a_violation_fails_the_audit_with_exit_code_4_and_its_evidence_line():
    checks = ReadChecks()
    checks.writes.acknowledged(12, 100.0)
    checks.linearizable(100.25, 12, 0, _answer(11), b"/k/1", MEMBER, NAME)
    checks.linearizable(100.5, 12, 0, _answer(12), b"/k/1", MEMBER, NAME)
    audit = Audit([ProcessAudit("local", reads=checks.counts, revision=12)], hashes=_equal_hashes())
    assert audit.failed and audit.as_json()["exit_code"] == AUDIT_EXIT_CODE
    assert "2 linearizable reads checked, 1 violations" in audit.line()
    evidence = [line for line in audit.error_lines() if "linearizability violation" in line]
    assert evidence == [
        "audit: linearizability violation: 127.0.0.1:2379 range/linearizable /k/1: header revision below an "
        "acknowledged write: read at rev 11 sent 0.250000 s after rev 12 was acknowledged"
    ]


def test_a_clean_audit_says_how_many_reads_it_checked():
    checks = ReadChecks()
    checks.linearizable(1.0, 0, 0, _answer(3), b"/k/1", MEMBER, NAME)
    audit = Audit([ProcessAudit("local", reads=checks.counts, revision=3)], hashes=_equal_hashes())
    assert not audit.failed and "1 linearizable reads checked, 0 violations" in audit.line()


def test_stale_gates_judge_the_worst_member_in_time_or_revisions():
    staleness = Staleness()
    for _ in range(100):
        staleness.record("a", 2, 5_000)
        staleness.record("b", 80, 1_500_000)
    gates = parse_gates("stale:p99<100ms,stale:revisions:p99<50,stale:max<2s")
    results = stale_gates.judge(gates, staleness.merged())
    assert [result.passed for result in results] == [False, False, True]
    assert results[0].shown.endswith("(b)") and 1499 <= results[0].measured <= 1501
    assert results[1].measured == 80
    assert not stale_gates.judge(gates[:1], {})[0].passed  # nothing measured: no pass


def test_stale_gates_take_milliseconds_or_revisions_and_refuse_anything_else_in_one_line():
    ms, revisions = parse_gates("stale:p99<100ms,stale:revisions:p99<50")
    assert (ms.label, ms.limit, revisions.label, revisions.limit) == (
        "stale p99",
        "< 100ms",
        "stale revisions p99",
        "< 50",
    )
    assert not request_gates((ms, revisions))  # never judged on requests, a level or a window
    refusals = {
        "stale:p99<50": "has no unit",
        "stale:revisions:p99<5ms": "has the unit 'ms' (revisions take none)",
        "stale:put:p99<5ms": "judges 'put'",
        "stale:errors<1%": "asks for errors",
    }
    for text, why in refusals.items():
        with pytest.raises(SlaError, match=re.escape(why)):
            parse_gates(text)
