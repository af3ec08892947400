"""Read the tool's HdrHistogram interval log and merge its intervals per key over a time window.

Each line of ``PREFIX_latency.hlog`` is one interval (one second) of one key, tagged ``TYPE:NAME:SERIES`` (for
example ``etcd:put:service``; see `etcd_users.files.HlogKey`), values in microseconds. Merging intervals gives exact
percentiles over any sub-window, which Locust's cumulative CSV percentiles cannot. The histograms are added with
`etcd_users.hdr`, as the recording side adds them.

Two ways to pick intervals: after a warm-up cut (`merge_intervals`, an interval counts when at least half of it lies
after the cut), and into windows [start, end) (`merge_windows`, an interval counts only when it lies wholly inside
one, so that nothing recorded before a window's start or after its end gets in).
"""

from __future__ import annotations

import binascii
import zlib
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from etcd_users.analysis.load import AnalysisError
from etcd_users.files import HlogKey
from etcd_users.hdr import add, merge

__all__ = ["HlogKey", "in_window", "inside", "intervals", "merge", "merge_intervals", "merge_window", "merge_windows"]

# Timestamps in the log have millisecond precision: an interval ending at 12.0005 s still ends "at" 12 s.
EDGE_S = 0.001

# Only used by the reader as a template; every interval carries its own range in its payload.
_REFERENCE = HdrHistogram(1, 60_000_000, 3)

_DECODE_ERRORS = (
    ValueError,
    TypeError,
    binascii.Error,
    zlib.error,
    HdrCookieException,
    HdrLengthException,
    HdrHistogramSettingsException,
)


def in_window(start_s: float, end_s: float, cut_s: float | None) -> bool:
    """Whether an interval belongs to the measured window: at least half of it lies after the cut."""
    return cut_s is None or (start_s + end_s) / 2 >= cut_s


def inside(start_s, end_s, window_start: float, window_end: float):
    """Whether the interval [start_s, end_s) lies wholly inside the window [window_start, window_end); on numbers,
    or element-wise on pandas Series of starts and ends."""
    return (start_s >= window_start - EDGE_S) & (end_s <= window_end + EDGE_S)


def intervals(path: Path):
    """(start_s, end_s, key, histogram) of each interval of the log, in file order; unix seconds."""
    reader = HistogramLogReader(str(path), _REFERENCE)
    try:
        while True:
            interval = reader.get_next_interval_histogram()
            if interval is None:
                break
            start_s = interval.get_start_time_stamp() / 1000
            end_s = interval.get_end_time_stamp() / 1000
            yield start_s, end_s, HlogKey.parse(interval.get_tag() or ""), interval
    except _DECODE_ERRORS as exc:
        raise AnalysisError(f"{path} is not a readable HdrHistogram log: {exc}") from None
    finally:
        reader.close()


def merge_intervals(path: Path, cut_s: float | None = None) -> dict[HlogKey, HdrHistogram]:
    """Merge the log's intervals per key, keeping those in the window after ``cut_s`` (unix seconds)."""
    merged: dict[HlogKey, HdrHistogram] = {}
    for start_s, end_s, key, interval in intervals(path):
        if in_window(start_s, end_s, cut_s):
            merged[key] = add(merged.get(key), interval)
    return merged


def merge_windows(path: Path, windows: Sequence[tuple[float, float]]) -> list[dict[HlogKey, HdrHistogram]]:
    """For each window [start, end) (unix seconds), the log's intervals that lie wholly inside it, merged per key.

    One pass over the log, whatever the number of windows; an interval inside two overlapping windows counts in both.
    """
    merged: list[dict[HlogKey, HdrHistogram]] = [{} for _ in windows]
    if not windows:
        return merged
    order = sorted(range(len(windows)), key=lambda index: windows[index][0])
    starts = [windows[index][0] for index in order]
    ends_so_far = list(accumulate((windows[index][1] for index in order), max))
    for start_s, end_s, key, interval in intervals(path):
        # only windows that start at or before the interval and end at or after it can hold it
        position = bisect_right(starts, start_s + EDGE_S) - 1
        while position >= 0 and ends_so_far[position] >= end_s - EDGE_S:
            index = order[position]
            if inside(start_s, end_s, *windows[index]):
                merged[index][key] = add(merged[index].get(key), interval)
            position -= 1
    return merged


def merge_window(path: Path, start: float, end: float) -> dict[HlogKey, HdrHistogram]:
    """The log's intervals that lie wholly inside [start, end) (unix seconds), merged per key."""
    return merge_windows(path, [(start, end)])[0]
