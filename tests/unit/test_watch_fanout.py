"""benchmarks/watch_fanout.py's own arithmetic: the watchers' closing line it reads, the CPU window, its arguments."""

import argparse

import pytest

from benchmarks.watch_fanout import counts, delays, parse_tally, window_cpu
from etcd_users.run_state.watch_tally import WatchTally


def test_the_watchers_closing_line_is_read_back_as_written() -> None:
    tally = WatchTally(watchers=1000, events=502000, first=10.0, last=20.0)
    tally.by_response = {0: 10, 7: 80, 120: 10}
    tally.by_watcher = {0: 2, 140: 998}
    tally.cancelled = {"mvcc: required revision has been compacted": 3}
    lines = ["[…] INFO/etcd_users.watchers.run: watchers: 1 watchers, 1 events", f"[…] INFO/locust: {tally.line()}"]
    found = parse_tally(lines)
    assert found == {
        "watchers": 1000,
        "events": 502000,
        "lag_p50": 7,
        "lag_p99": 120,
        "lag_max": 120,
        "behind": 998,
        "cancelled": "mvcc: required revision has been compacted 3",
    }
    assert parse_tally(["no watchers here"]) is None


def test_the_cpu_is_taken_between_the_samples_inside_the_puts_window() -> None:
    samples = [(0.0, 0.0, 0.0), (1.0, 0.5, 0.1), (3.0, 1.5, 0.5), (4.0, 9.0, 9.0)]
    # the writer's start-up (before 1.0) and its end (after 3.0) are left out
    assert window_cpu(samples, 0.5, 3.5) == pytest.approx((50.0, 20.0))
    assert window_cpu(samples[:1], 0.5, 3.5) == (0.0, 0.0)


def test_bad_lists_are_refused_with_the_fix() -> None:
    assert counts("0,100,1000") == [0, 100, 1000] and delays("0,0.002") == [0.0, 0.002]
    for parse, text in ((counts, "-1"), (counts, "ten"), (delays, "nan"), (delays, "")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
