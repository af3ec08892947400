"""The tail's pure parts: a member's page read and compared scrape to scrape, the spikes against the run's own median,
the worst seconds and the ranking of their causes, the precondition, the seconds' exact P99."""

from __future__ import annotations

from etcd_users import hdr
from etcd_users.features.tail import attribution
from etcd_users.features.tail.events import Event
from etcd_users.features.tail.member_signals import Sample, between, read_page
from etcd_users.features.tail.seconds import OPEN_SECONDS, Second, SecondsKept

PAGE = """# HELP etcd_server_leader_changes_seen_total The number of leader changes seen.
# TYPE etcd_server_leader_changes_seen_total counter
etcd_server_leader_changes_seen_total {leader}
etcd_server_is_leader {is_leader}
etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_bucket{{le="100"}} {compactions}
etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_bucket{{le="+Inf"}} {compactions}
etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_sum {compaction_ms}
etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count {compactions}
etcd_debugging_mvcc_db_compaction_keys_total {keys}
etcd_disk_backend_defrag_duration_seconds_sum {defrag_s}
etcd_disk_backend_defrag_duration_seconds_count {defrags}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.001"}} {fast}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.016"}} {fsyncs}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="+Inf"}} {fsyncs}
etcd_disk_wal_fsync_duration_seconds_sum {fsync_s}
etcd_disk_wal_fsync_duration_seconds_count {fsyncs}
etcd_server_slow_apply_total 0
grpc_server_started_total{{grpc_method="Snapshot",grpc_service="etcdserverpb.Maintenance"}} {streams}
grpc_server_started_total{{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"}} 999
process_cpu_seconds_total 12.5
"""
QUIET = dict(leader=1, is_leader=0, compactions=2, compaction_ms=30, keys=100, defrag_s=0, defrags=0)
QUIET |= dict(fast=90, fsyncs=100, fsync_s=0.05, streams=0)


def page(**changes) -> str:
    return PAGE.format(**(QUIET | changes))


def test_a_quiet_interval_has_no_event_and_keeps_the_fsync_mean():
    events, samples = between("m:1", read_page(page(), 10.0), read_page(page(fsyncs=110, fast=100, fsync_s=0.06), 11.0))
    assert events == []
    [fsync] = [sample for sample in samples if sample.kind == "fsync"]
    assert (round(fsync.mean_ms, 9), fsync.count, fsync.since, fsync.at) == (1.0, 10, 10.0, 11.0)
    assert fsync.p99_ms is not None and fsync.p99_ms <= 1.0  # all ten in the 1 ms bucket


def test_each_counter_that_grew_is_an_event_of_its_member_between_the_two_scrapes():
    after = page(leader=2, is_leader=1, compactions=3, compaction_ms=95, keys=1100, defrags=1, defrag_s=0.25, streams=1)
    events, _ = between("m:1", read_page(page(), 10.0), read_page(after, 11.0))
    by_cause = {event.cause: event for event in events}
    assert sorted(by_cause) == ["compaction", "defrag", "leader-change", "snapshot"]
    assert all((event.member, event.since, event.at) == ("m:1", 10.0, 11.0) for event in events)
    assert "1 compaction taking 65 ms, 1000 keys compacted" in by_cause["compaction"].evidence
    assert "1 defragmentation taking 250 ms" in by_cause["defrag"].evidence
    assert "now the leader" in by_cause["leader-change"].evidence
    assert "1 Snapshot stream started by a client" in by_cause["snapshot"].evidence
    assert "between the scrapes at" in by_cause["defrag"].evidence


def test_counters_that_went_back_a_restarted_member_are_no_event():
    events, _ = between("m:1", read_page(page(leader=5, compactions=9, defrags=3), 10.0), read_page(page(), 11.0))
    assert events == []


def sample(at: float, mean_ms: float, kind: str = "fsync", p99_ms: float | None = None) -> Sample:
    return Sample(kind, "m:1", at - 1, at, mean_ms, 10, p99_ms)


def test_a_spike_is_three_times_the_member_s_own_median_and_at_least_a_millisecond():
    samples = [sample(at, 2.0) for at in range(10)] + [sample(20, 6.5), sample(21, 5.0)]
    spikes = attribution.spikes(samples)
    assert [(event.cause, event.at) for event in spikes] == [("fsync", 20)]
    assert "3.2x the member's median of 2.00 ms" in spikes[0].evidence
    # the same ratio below a millisecond is no spike
    assert attribution.spikes([sample(at, 0.1) for at in range(10)] + [sample(20, 0.9)]) == []


def event(at: float, cause: str, since: float | None = None, size: float = 1.0, member: str = "m:1") -> Event:
    return Event(at, cause, member, f"{cause} seen", since=since, size=size)


def test_a_second_s_causes_inside_it_come_before_heavier_ones_beside_it_and_far_events_are_none():
    events = [
        event(101.5, "leader-change"),  # the second after
        event(100.6, "compaction", since=99.7),  # overlaps the second
        event(103.5, "defrag"),  # two seconds later: no cause of second 100
        event(100.2, "compaction", since=99.2, size=0.5, member="m:2"),
    ]
    found = attribution.causes(100, events)
    assert [(e.cause, e.member, distance) for e, distance in found] == [
        ("compaction", "m:1", 0),
        ("compaction", "m:2", 0),
        ("leader-change", "m:1", 1),
    ]
    assert attribution.causes(110, events) == []


def test_the_report_names_the_worst_seconds_and_every_second_with_errors_else_unexplained():
    seconds = {s: Second(s, float((s - 1000) % 7), 100, 0) for s in range(1000, 1020)}
    seconds[1003].errors = 2  # P99 3 ms: not among the 2 worst, reported for its errors
    tail = attribution.report(seconds, [event(1006.5, "defrag", since=1006.0)], 2, started=1000.4)
    assert [(item["at"], item["second"], item["p99_ms"]) for item in tail["seconds"]] == [
        (1006, 6, 6.0),
        (1013, 13, 6.0),
        (1003, 3, 3.0),
    ]
    assert [cause["cause"] for cause in tail["seconds"][0]["causes"]] == ["defrag"]
    assert tail["seconds"][0]["causes"][0]["evidence"] == "defrag seen; in that second"
    assert tail["seconds"][1]["causes"] == [
        {"cause": "unexplained", "member": "", "evidence": "no event within 1 s of it"}
    ]
    assert tail["events"] == [{"at": 1006.5, "cause": "defrag", "member": "m:1", "evidence": "defrag seen"}]
    lines = attribution.lines(tail, None, "1 member's /metrics read each second")
    assert lines[0].startswith("tail: the 3 worst seconds") and "not a proof" in lines[0]
    assert (
        lines[1].startswith("tail: s 6 (") and "P99 6.000 ms, 100 requests, 0 errors: beside defrag on m:1" in lines[1]
    )
    assert lines[2].endswith(": unexplained (no event within 1 s)")
    assert lines[-1] == "tail: 1 event during the run (defrag 1); 1 member's /metrics read each second"
    assert attribution.lines({"seconds": [], "events": []}, None, "x")[-1] == "tail: no event during the run; x"


def test_the_precondition_is_broken_by_a_compaction_a_snapshot_or_a_slow_fsync_in_the_window():
    quiet = [sample(at, 2.0, p99_ms=4.0) for at in range(100, 110)]
    assert attribution.precondition([event(105, "defrag")], quiet, 100, 110) == {
        "met": True,
        "broken_by": None,
        "breaks": 0,
    }
    slow = attribution.precondition([], [*quiet, sample(107, 3.0, p99_ms=12.5)], 100, 110)
    assert not slow["met"] and slow["broken_by"].startswith("WAL fsync P99 12.5 ms on m:1 at ")
    both = attribution.precondition(
        [event(108, "compaction"), event(104, "snapshot")], [sample(107, 3.0, p99_ms=12.5)], 100, 110
    )
    assert both["broken_by"].startswith("snapshot on m:1 at ") and both["breaks"] == 3
    assert attribution.precondition([event(120, "compaction")], quiet, 100, 110)["met"]  # after the window


def test_the_seconds_p99_is_the_exact_one_of_every_name_merged_and_late_reports_still_count():
    kept = SecondsKept()
    fast = hdr.histogram_of([1.0] * 98)
    slow = hdr.histogram_of([40.0, 50.0])
    kept.add(500, ("etcd", "put", "service"), fast, 0)
    kept.add(500, ("etcd", "range", "service"), slow, 3)
    kept.add(500, ("etcd", "put", "intended"), hdr.histogram_of([900.0] * 50), 0)  # not the service time
    kept.add(500 + OPEN_SECONDS + 1, ("etcd", "put", "service"), fast, 0)  # closes second 500
    kept.add(500, ("etcd", "put", "service"), None, 2)  # a worker's late report
    second = kept.all()[500]
    assert (second.requests, second.errors) == (105, 5)
    assert 39.9 <= second.p99_ms <= 40.1  # the 99th of 100 latencies: 40 ms, to HDR's precision


def test_seconds_in_which_nothing_ended_while_a_request_waited_are_the_worst_and_a_quiet_second_is_none():
    kept = SecondsKept()
    for second in (100, 101, 105, 106, 110, 113):  # a stall from 102 to 104; 107-109, 111-112 nobody asked
        latencies = [2.0] * 50
        if second == 105:
            latencies.append(4400.0)  # answered in 105, so sent in 101 at the latest: on the wire through 102-104
        if second == 110:
            latencies.append(1200.0)  # sent in 108 or 109, answered in 110: through no whole second for sure
        kept.add(second, ("etcd", "put", "service"), hdr.histogram_of(latencies), 0)
    seconds = kept.all()
    assert 4400 <= seconds[105].max_ms <= 4405  # to HDR's 3 significant digits
    stalled = attribution.stalls(seconds)
    assert [(s.second, s.requests, s.p99_ms) for s in stalled] == [(102, 0, None), (103, 0, None), (104, 0, None)]
    assert all(s.waited_ms == seconds[105].max_ms for s in stalled)
    snapshot = Event(103.4, "snapshot", "m:1", "a snapshot was taken")
    tail = attribution.report(seconds, [snapshot], 4, started=100.0)
    assert [(item["second"], item["waited_ms"] is not None) for item in tail["seconds"]] == [
        (2, True), (3, True), (4, True), (0, False),
    ]  # fmt: skip
    assert {cause["cause"] for cause in tail["seconds"][1]["causes"]} == {"snapshot"}
    printed = attribution.lines(tail, None, "x", attribution.ranked(seconds, 4))
    assert printed[0].startswith("tail: the 4 worst seconds (those in which nothing ended, then by exact P99")
    assert printed[2].startswith("tail: s 3 (00:01:43 UTC): no request ended, one of 4.40") and "snapshot" in printed[2]
    assert attribution.lines(attribution.report(seconds, [], 1, started=100.0), None, "x", 1)[0].startswith(
        "tail: the 1 worst second (those in which nothing ended"
    )


def test_the_plain_reader_of_the_wanted_lines_agrees_with_the_exposition_parser():
    from etcd_users.exposition import parse_metrics
    from etcd_users.features.tail.member_signals import WANTED, samples

    text = page() + 'grpc_server_started_total{grpc_method="Snapshot",note="a \\"quoted\\", comma"} 2\n'
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(WANTED))
    assert list(samples(text)) == [(s.name, s.labels, s.value) for s in parse_metrics(wanted)]
    assert len(list(samples(text))) == 16


def write_tail(prefix, seconds: list[list[str]], met: bool = True) -> None:
    import json
    from pathlib import Path

    document = {
        "seconds": [
            {
                "at": 1000 + i,
                "second": i,
                "p99_ms": 5.0,
                "requests": 10,
                "errors": 0,
                "causes": [
                    {"cause": c, "member": "" if c == "unexplained" else "m:1", "evidence": "e"} for c in causes
                ],
            }
            for i, causes in enumerate(seconds)
        ],
        "events": [],
        "precondition": {"met": met, "broken_by": None if met else "compaction on m:1 at 00:00:01.000", "breaks": 1},
    }
    Path(f"{prefix}_tail.json").write_text(json.dumps(document))


def test_the_analysis_names_causes_one_side_s_worst_seconds_had_and_the_other_s_lacked(tmp_path):
    from etcd_users.analysis.load import Run
    from etcd_users.analysis.tail import cause_difference_notes, precondition_note, worst_seconds_table

    before, after, bare = (Run(label, str(tmp_path / label)) for label in ("before", "after", "bare"))
    write_tail(before.prefix, [["compaction"], ["unexplained"]])
    write_tail(after.prefix, [["defrag", "compaction"], ["leader-change"]], met=False)
    assert cause_difference_notes([before], [after]) == [
        "the candidate's worst seconds had defrag, leader-change beside them and the baseline's did not "
        "(PREFIX_tail.json): a difference the verdicts may come from."
    ]
    assert cause_difference_notes([before], [before]) == []
    assert cause_difference_notes([bare], [after]) == []  # a side without tails: nothing to say
    assert "did not meet the source reports' precondition" in precondition_note(after)
    assert "compaction on m:1 at 00:00:01.000 first" in precondition_note(after)
    assert precondition_note(before).startswith("before: the window met") and precondition_note(bare) is None
    table = worst_seconds_table([before, after])
    assert list(table["beside"]) == [
        "compaction on m:1",
        "unexplained",
        "defrag on m:1; compaction on m:1",
        "leader-change on m:1",
    ]


def test_an_outage_s_thousand_seconds_with_errors_are_all_in_the_report_and_twenty_are_printed():
    seconds = {s: Second(s, 2.0, 10, 0) for s in range(0, 5)} | {s: Second(s, None, 3, 3) for s in range(5, 1005)}
    tail = attribution.report(seconds, [], 3, started=0.0)
    assert len(tail["seconds"]) == 1003
    printed = attribution.lines(tail, None, "x", attribution.ranked(seconds, 3))
    assert len([line for line in printed if line.startswith("tail: s ")]) == 3 + attribution.LINE_ERROR_SECONDS
    assert "tail: and 980 more seconds with errors (PREFIX_tail.json has them all)" in printed
    assert "P99 -, 3 requests, 3 errors: unexplained" in printed[4]


def test_the_client_s_gc_pauses_and_the_pool_s_lines_are_events_of_the_process():
    import logging
    import time

    from etcd_users.features.tail.client_signals import GC_PAUSE_MS, POOL_LOGGER, ClientSignals

    signals = ClientSignals("local")
    pool = logging.getLogger(POOL_LOGGER)
    level = pool.level
    pool.setLevel(logging.INFO)  # Locust's default --loglevel
    signals.start()
    try:
        signals._on_gc("start", {"generation": 2, "collected": 0})
        time.sleep(GC_PAUSE_MS * 1.5 / 1000.0)
        signals._on_gc("stop", {"generation": 2, "collected": 7})
        signals._on_gc("start", {"generation": 0, "collected": 0})
        signals._on_gc("stop", {"generation": 0, "collected": 1})  # a quick one: nothing
        pool.warning("etcd endpoint %s does not answer (%s); skipping it", "http://127.0.0.1:2379", "deadline")
        pool.info("etcd endpoint %s answers again; using it (left out %.1fs)", "http://127.0.0.1:2379", 3.0)
        pool.info("etcd leader: %s", "http://127.0.0.1:2379")  # not an event
    finally:
        signals.stop()
        pool.setLevel(level)
    events = signals.take()
    assert [(event.cause, event.member) for event in events] == [
        ("client-gc", "local"),
        ("member-unanswering", "127.0.0.1:2379"),
        ("reconnect", "local"),
    ]
    assert "generation 2" in events[0].evidence and "7 objects collected" in events[0].evidence
    assert events[0].size >= GC_PAUSE_MS and events[0].since < events[0].at
    assert "left 127.0.0.1:2379 out: it did not answer (deadline)" in events[1].evidence
    assert signals.take() == []


def test_a_late_thread_is_one_event_a_second_unless_a_later_wake_up_is_later_still(monkeypatch):
    from etcd_users.features.tail import client_signals
    from etcd_users.features.tail.client_signals import LAG_MS, ClientSignals

    monkeypatch.setattr(client_signals.time, "time", lambda: 1000.5)  # every call in one second
    signals = ClientSignals("w1")
    for lag in (LAG_MS - 1, LAG_MS + 10, LAG_MS + 5, LAG_MS + 30):
        signals._lagged("users' thread (gevent)", lag)
    signals._lagged("transport's loop thread", LAG_MS + 5)
    events = signals.take()
    assert [event.evidence for event in events] == [
        f"the client's users' thread (gevent) ran {LAG_MS + 10:.0f} ms late",
        f"the client's users' thread (gevent) ran {LAG_MS + 30:.0f} ms late",
        f"the client's transport's loop thread ran {LAG_MS + 5:.0f} ms late",
    ]
    assert all(event.cause == "loop-lag" and event.member == "w1" for event in events)
