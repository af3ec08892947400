"""The cost of a disruption (``etcd_users.judging.disruption_cost``) on hand-made per-second data with known
answers."""

import pytest

from etcd_users import hdr
from etcd_users.judging.disruption_cost import Second, cost, describe, longest_gap, recovery, window_seconds
from etcd_users.judging.disruption_span import SpanCost


def second(latencies_ms: list[float], failures: int = 0) -> Second:
    return Second(len(latencies_ms), failures, hdr.histogram_of(latencies_ms) if latencies_ms else None)


def steady(first: int, last: int, latency_ms: float = 1.0) -> dict[int, Second]:
    """100 successes a second of ``latency_ms`` each, seconds first..last."""
    return {s: second([latency_ms] * 100) for s in range(first, last + 1)}


def test_the_window_is_the_whole_seconds_it_touches():
    assert window_seconds(100.2, 100.7) == range(100, 101)
    assert window_seconds(100.9, 103.0) == range(100, 104)


def test_the_longest_gap_starts_inside_the_window_and_runs_on_past_it():
    data = steady(0, 60)
    for s in (41, 42, 43, 44):  # no success in 41..44; the window touches 40..42
        data[s] = second([], failures=3)
    data[50] = second([])  # a gap after the window does not count
    data[51] = second([])
    assert longest_gap(data, range(40, 43)) == 4
    assert longest_gap(data, range(45, 46)) == 0
    del data[52]  # a second missing from the data had no success
    assert longest_gap(data, range(50, 51)) == 3
    assert longest_gap(data, range(50, 51), last_second=50) == 1


def test_percentiles_during_and_before_come_from_the_merged_seconds():
    data = steady(0, 59, latency_ms=1.0)  # 30 s before the window: P99 1 ms
    data[30] = second([1.0] * 90 + [50.0] * 10)  # during: 10 % at 50 ms
    data[31] = second([1.0] * 100)
    result = cost("put", data, started_at=30.5, finished_at=31.2)
    assert result.p99_before_ms == pytest.approx(1.0, rel=1e-3)
    assert result.p99_ms == pytest.approx(50.0, rel=1e-3)  # 10 of 200 above: P99 is 50 ms
    assert result.p999_ms == pytest.approx(50.0, rel=1e-3)
    assert result.requests == 200 and result.errors == 0
    assert result.gap_s == 0
    assert result.recovery_s == pytest.approx(0.0)  # the second the action ended in (31) was already back


def test_recovery_is_the_start_of_the_first_second_within_the_ratio():
    data = steady(0, 40, latency_ms=2.0)
    data[20] = second([30.0] * 100)
    data[21] = second([10.0] * 100)
    data[22] = second([2.5] * 100)  # 1.25x: not yet
    data[23] = second([2.3] * 100)  # 1.15x: back
    assert recovery(data, 20.4, 2.0) == pytest.approx(23 - 20.4)
    assert recovery(data, 20.4, None) is None
    assert recovery(data, 20.4, 2.0, last_second=22) is None


def test_errors_and_requests_count_the_window_s_seconds_only():
    data = steady(0, 40)
    data[10] = second([1.0] * 50, failures=7)
    data[11] = second([1.0] * 60, failures=1)
    data[12] = second([], failures=4)
    result = cost("put", data, started_at=10.0, finished_at=11.5)
    assert (result.requests, result.errors) == (118, 8)
    assert result.gap_s == 0  # second 12 had no success, but it begins after the window
    assert result.p99_before_ms == pytest.approx(1.0, rel=1e-3)  # only 10 s of data before: what there is


def test_a_window_before_any_data_has_no_figures():
    result = cost("put", {}, started_at=5.0, finished_at=6.0)
    assert (result.p99_ms, result.p99_before_ms, result.recovery_s, result.requests) == (None, None, None, 0)


def test_the_line_says_it_all():
    data = steady(0, 40)
    data[20] = second([1.0] * 90 + [4.0] * 10, failures=2)
    line = describe(cost("put", data, 20.1, 20.3), {"etcdserver: leader changed": 2})
    assert line == (
        "put: longest gap without a success 0 s, P99 4.00 ms (before 1.00 ms, 4.0x), P99.9 4.00 ms (before 1.00 ms), "
        "2 errors of 102 requests (etcdserver: leader changed ×2), P99 within 1.2x of before 0.7 s after the end"
    )


def test_the_span_s_figures_replace_the_whole_seconds_and_the_before_stays():
    data = steady(0, 40)
    data[20] = second([1.0] * 90 + [4.0] * 10, failures=2)
    span = SpanCost(12.34, 4.0, 4.0, 12, 2, {"raft proposal dropped": 2})
    measured = cost("put", data, 20.1, 20.3, span=span)
    assert (measured.gap_ms, measured.gap_s, measured.p99_ms, measured.requests, measured.errors) == (
        12.34,
        pytest.approx(0.01234),
        4.0,
        12,
        2,
    )
    assert measured.p99_before_ms == cost("put", data, 20.1, 20.3).p99_before_ms  # still the 30 s before
    line = describe(measured, span.errors_by_label)
    assert line.startswith("put: longest gap without a success 12.34 ms, P99 4.00 ms (before 1.00 ms, 4.0x)")
    assert "2 errors of 12 requests (raft proposal dropped ×2)" in line
