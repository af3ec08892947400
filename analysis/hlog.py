"""Read the tool's HdrHistogram interval log and merge its intervals per key over a time window.

Each line of ``PREFIX_latency.hlog`` is one interval (one second) of one key, tagged ``TYPE:NAME:SERIES`` (for
example ``etcd:put:service``; see `etcd_users.files.HlogKey`), values in microseconds. Merging intervals gives exact
percentiles over any sub-window, which Locust's cumulative CSV percentiles cannot. The histograms are added with
`etcd_users.hdr`, as the recording side adds them.
"""

from __future__ import annotations

import binascii
import zlib
from pathlib import Path

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from analysis.load import AnalysisError
from etcd_users.files import HlogKey
from etcd_users.hdr import add, merge

__all__ = ["HlogKey", "in_window", "merge", "merge_intervals"]

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


def merge_intervals(path: Path, cut_s: float | None = None) -> dict[HlogKey, HdrHistogram]:
    """Merge the log's intervals per key, keeping those in the window after ``cut_s`` (unix seconds)."""
    merged: dict[HlogKey, HdrHistogram] = {}
    reader = HistogramLogReader(str(path), _REFERENCE)
    try:
        while True:
            interval = reader.get_next_interval_histogram()
            if interval is None:
                break
            start_s = interval.get_start_time_stamp() / 1000
            end_s = interval.get_end_time_stamp() / 1000
            if not in_window(start_s, end_s, cut_s):
                continue
            key = HlogKey.parse(interval.get_tag() or "")
            merged[key] = add(merged.get(key), interval)
    except _DECODE_ERRORS as exc:
        raise AnalysisError(f"{path} is not a readable HdrHistogram log: {exc}") from None
    finally:
        reader.close()
    return merged
