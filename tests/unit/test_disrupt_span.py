"""A disruption's span to 10 ms: the timeline's parts, their merge across processes, and the gap arithmetic."""

import pytest

from etcd_users import hdr
from etcd_users.judging.disruption_cost import cost, describe
from etcd_users.judging.disruption_span import longest_silence, span_cost
from etcd_users.latency import store as store_module
from etcd_users.latency.store import LatencyStore
from etcd_users.latency.timeline import SLOTS_PER_S, SuccessSlots, Timeline, place_code, second_part, slot_of

PUT = ("etcd", "put", "service")


def successes(*slot_ranges: range) -> SuccessSlots:
    """Two successes in each slot of ``slot_ranges``: at 0.05 and 0.95 of it."""
    slots = sorted({slot for slot_range in slot_ranges for slot in slot_range})
    kept = SuccessSlots(slots[0])
    firsts = [place_code((slot + 0.05) / SLOTS_PER_S, slot) for slot in slots]
    lasts = [place_code((slot + 0.95) / SLOTS_PER_S, slot) for slot in slots]
    kept.add(slots, firsts, lasts)
    return kept


def silence(kept: SuccessSlots, first: int, last: int, end: int):
    return pytest.approx(longest_silence(kept, first, last, end), abs=0.01)


def test_a_steady_stream_has_only_the_silences_between_its_successes():
    assert silence(successes(range(40)), 10, 20, 40) == 0.1


def test_the_silence_inside_the_span():
    assert silence(successes(range(10), range(15, 16), range(20, 40)), 10, 20, 40) == 5.1  # 9.95 to 15.05


def test_a_silence_that_spans_both_edges_runs_from_the_last_success_before_to_the_first_after():
    # successes in slots 0..4 and 30..39; the span 10..20 is inside the silence from 4.95 to 30.05
    assert silence(successes(range(5), range(30, 40)), 10, 20, 40) == 25.1


def test_a_silence_that_begins_before_the_span_and_ends_inside_it_counts():
    assert silence(successes(range(5), range(12, 40)), 10, 20, 40) == 7.1


def test_a_silence_after_the_span_does_not_count():
    assert silence(successes(range(25), range(35, 40)), 10, 20, 40) == 0.1
    # a success in the span's last slot ends it: the silence after it is after the span
    assert silence(successes(range(21), range(35, 40)), 10, 20, 40) == 0.1
    assert silence(successes(range(20), range(35, 40)), 10, 20, 40) == 15.1


def test_a_silence_still_going_runs_to_the_end_of_the_data():
    assert silence(successes(range(12)), 10, 20, 30) == 18.05


def test_a_span_before_the_name_s_first_success_counts_from_the_span_s_start():
    assert silence(successes(range(15, 40)), 10, 20, 40) == 5.05
    assert silence(successes(range(1000, 1040)), 990, 995, 1040) == 10.05
    assert silence(successes(range(1000, 1040)), 950, 960, 980) == 30  # no data of the name up to the end


def test_the_origin_offsets_every_slot():
    assert silence(successes(range(1000, 1005), range(1030, 1040)), 1010, 1020, 1040) == 25.1


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch):
    """A store that records successes at (unix time, ms) and failures at (unix time, ms, label): its parts."""
    clock = [0.0]
    monkeypatch.setattr(store_module, "_now", lambda: clock[0])

    def record(times_and_latencies, failures=()):
        store = LatencyStore()
        store.fine = True
        for at, latency in times_and_latencies:
            clock[0] = at
            store.record("etcd", "put", latency)
        for at, latency, label in failures:
            clock[0] = at
            store.record("etcd", "put", latency, exception=label)
        return store.export_report()["timeline"]

    return record


def test_processes_whose_successes_interleave_leave_no_silence_in_their_union(recorded):
    start = 1000.0
    # one process succeeds in the even 10 ms slots, the other in the odd ones: each alone is silent half the time
    even = recorded([(start + 0.02 * i + 0.001, 1.0) for i in range(50)])
    odd = recorded([(start + 0.02 * i + 0.011, 1.0) for i in range(50)])
    alone = Timeline(keep_s=60)
    for part in even:
        alone.add(part)
    assert span_cost(alone, "put", start + 0.2, start + 0.6, start + 1.0).gap_ms == pytest.approx(20.0, abs=0.1)
    merged = Timeline(keep_s=60)
    for part in (*even, *odd):
        merged.add(part)
    assert span_cost(merged, "put", start + 0.2, start + 0.6, start + 1.0).gap_ms == pytest.approx(10.0, abs=0.1)


def test_a_freeze_is_the_silence_between_two_processes_successes(recorded):
    start = 2000.0
    before = recorded([(start + 0.001 * i, 1.0) for i in range(300)])  # one process until 0.3 s
    after = recorded([(start + 0.8 + 0.001 * i, 500.0) for i in range(200)])  # the other from 0.8 s
    timeline = Timeline(keep_s=60)
    for part in (*after, *before):  # in any order
        timeline.add(part)
    figures = span_cost(timeline, "put", start + 0.3, start + 0.8, start + 1.0)
    assert figures.gap_ms == pytest.approx(501.0, abs=0.1)  # the last success at 0.299 s, the next at 0.8 s


def test_the_span_s_latencies_are_those_of_its_100_ms_slots(recorded):
    start = 3000.0
    fast = [(start + 0.001 * i, 1.0) for i in range(1000)]
    slow = [(start + 0.5 + 0.001 * i, 200.0) for i in range(5)]  # 5 slow ones at 0.500-0.504 s
    timeline = Timeline(keep_s=60)
    for part in recorded(sorted(fast + slow)):
        timeline.add(part)
    figures = span_cost(timeline, "put", start + 0.5, start + 0.55, start + 1.0)
    assert 199.0 <= figures.p99_ms <= 201.0
    assert figures.requests == 205  # 0.5-0.65 s: the span and its 100 ms tail, in 100 ms slots: 0.5-0.7
    whole = timeline.histogram("put", slot_of(start) // 10, slot_of(start + 0.99) // 10)
    assert whole.total_count == 1005
    assert hdr.percentiles_us(whole, (99.0,))[0] < 2000  # the whole second's P99: 5 of 1005


def test_errors_count_when_their_request_was_out(recorded):
    start = 4000.0
    parts = recorded(
        [(start + 0.001 * i, 1.0) for i in range(10)],
        failures=[
            (start + 0.9, 2000.0, "raft proposal dropped"),  # sent at -1.1 s, still out during the span: counted
            (start + 0.3, 10.0, "etcdserver: request timed out"),  # out at 0.29-0.3 s: before the span
            (start + 0.55, 10.0, "etcdserver: request timed out"),  # inside
        ],
    )
    timeline = Timeline(keep_s=60)
    for part in parts:
        timeline.add(part)
    figures = span_cost(timeline, "put", start + 0.5, start + 0.6, start + 1.0)
    assert figures.errors_by_label == {"raft proposal dropped": 1, "etcdserver: request timed out": 1}
    assert figures.errors == 2


def test_a_freeze_s_calls_that_ran_out_of_time_and_those_the_pool_cut_short_are_told_apart(recorded):
    start = 5000.0
    parts = recorded(
        [(start + 0.001 * i, 1.0) for i in range(10)],
        failures=[
            (start + 2.5, 2000.0, "DEADLINE_EXCEEDED"),  # sent at 0.5 s: its 2 s timeout ran out as it was abandoned
            (start + 2.5, 1500.0, "UNAVAILABLE"),  # sent at 1.0 s: cut short when the pool left its member out
            (start + 2.5, 1200.0, "UNAVAILABLE"),
        ],
    )
    timeline = Timeline(keep_s=60)
    for part in parts:
        timeline.add(part)
    figures = span_cost(timeline, "put", start + 1.0, start + 2.5, start + 3.0)
    assert figures.errors_by_label == {"DEADLINE_EXCEEDED": 1, "UNAVAILABLE": 2}
    line = describe(cost("put", {}, start + 1.0, start + 2.5, span=figures), figures.errors_by_label)
    assert "3 errors of 3 requests (DEADLINE_EXCEEDED ×1, UNAVAILABLE ×2)" in line


def test_the_merge_is_a_union_of_slots():
    timeline = Timeline()
    # latency and end time, alternating, as the store keeps a second's successes
    timeline.add(second_part({PUT: [1.0, 5.001, 1.0, 5.002, 1.0, 5.021, 1.0, 5.025]}, {}))
    # another process, earlier than the first (the slots grow to the left), and later inside slot 500
    timeline.add(second_part({PUT: [1.0, 4.981, 1.0, 5.005, 1.0, 5.008]}, {}))
    kept = timeline.successes["put"]
    assert [slot for slot in range(495, 505) if kept.has(slot)] == [498, 500, 502]
    index = 500 - kept.origin
    assert (kept.first[index], kept.last[index]) == (place_code(5.001, 500), place_code(5.008, 500))
