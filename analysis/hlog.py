"""Read the tool's HdrHistogram interval log and merge its intervals per key over a time window.

Each line of ``PREFIX_latency.hlog`` is one interval (one second) of one key, tagged ``TYPE:NAME:SERIES`` (for
example ``etcd:put:service``), values in microseconds. Merging intervals gives exact percentiles over any
sub-window, which Locust's cumulative CSV percentiles cannot.
"""

from __future__ import annotations

import binascii
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from analysis.load import AnalysisError

# Only used by the reader as a template; every interval carries its own range in its payload.
_REFERENCE = HdrHistogram(1, 60_000_000, 3)

_UNSAFE_TAG_CHARACTERS = re.compile(r"[\s,]")
_DECODE_ERRORS = (
    ValueError,
    TypeError,
    binascii.Error,
    zlib.error,
    HdrCookieException,
    HdrLengthException,
    HdrHistogramSettingsException,
)


@dataclass(frozen=True)
class HlogKey:
    """The parts of an interval's tag."""

    type: str
    name: str
    series: str

    @classmethod
    def parse(cls, tag: str) -> HlogKey:
        request_type, _, rest = tag.partition(":")
        name, _, series = rest.rpartition(":")
        if not name:
            # A tag without a series is taken as the service time.
            name, series = rest, "service"
        return cls(request_type, name, series)


def tag_name(name: str) -> str:
    """A request name as it appears in a tag: log tags may not hold commas or whitespace."""
    return _UNSAFE_TAG_CHARACTERS.sub("_", name)


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
            merged[key] = _add(merged.get(key), interval)
    except _DECODE_ERRORS as exc:
        raise AnalysisError(f"{path} is not a readable HdrHistogram log: {exc}") from None
    finally:
        reader.close()
    return merged


def merge(histograms: list[HdrHistogram]) -> HdrHistogram | None:
    """One histogram holding all of ``histograms`` (None when the list is empty)."""
    total = None
    for histogram in histograms:
        total = _add(total, histogram)
    return total


def _add(total: HdrHistogram | None, histogram: HdrHistogram) -> HdrHistogram:
    """Add ``histogram`` into a fresh or existing total, widening the total if the new values do not fit."""
    highest = max(histogram.highest_trackable_value, total.highest_trackable_value if total else 0)
    if total is None or highest > total.highest_trackable_value:
        wider = HdrHistogram(histogram.lowest_trackable_value, highest, histogram.significant_figures)
        if total is not None:
            wider.add(total)
        total = wider
    total.add(histogram)
    return total
