"""HDR histogram maths, in one place for the recording side and the analysis: latencies in whole microseconds.

hdrh's own ``get_value_at_percentile`` and ``get_mean_value`` walk the histogram in Python, one bucket at a time;
the functions here give the same values (HdrHistogram's conventions: a percentile is the highest value equivalent
to the sample at its rank, the mean counts each sample at the middle of its bucket) in a cumulative pass in C.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_FIGURES = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def histogram_of(latencies_ms: Sequence[float]) -> HdrHistogram:
    """Latencies in ms as whole microseconds (rounded half to even, clamped to the histogram's range), counted as
    hdrh's ``record_value`` of each would count them, in a few array operations.

    Recording each request as it comes costs about a microsecond of Python on the thread that runs every user; a
    second's latencies are kept in a list instead and counted here once, when the second closes.
    """
    if not len(latencies_ms):
        return new_histogram()
    return _counted(_micros(latencies_ms))


def histogram_of_counts(values: Sequence[int]) -> HdrHistogram:
    """Whole numbers from 0 (revisions, microseconds that may be 0) in one histogram, as ``histogram_of`` counts
    latencies; values above the histogram's range are clamped to it."""
    if not len(values):
        return new_histogram()
    return _counted(np.clip(np.asarray(values, dtype=np.int64), 0, HIGHEST_US))


_LAYOUT = new_histogram()  # the layout of every histogram of the tool


def counts_indexes(latencies_ms: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The whole microseconds of ``latencies_ms`` and each one's index in a histogram's counts, as ``histogram_of``
    counts them: slices of a second's latencies become small histograms without making full ones."""
    micros = _micros(latencies_ms)
    return micros, _indexes(_LAYOUT, micros)


def _micros(latencies_ms: Sequence[float]) -> np.ndarray:
    micros = np.clip(np.rint(np.asarray(latencies_ms, dtype=np.float64) * 1000.0), LOWEST_US, HIGHEST_US)
    return micros.astype(np.int64)


def _counted(micros: np.ndarray) -> HdrHistogram:
    histogram = new_histogram()
    counts = np.ctypeslib.as_array(histogram.counts)
    counts += np.bincount(_indexes(histogram, micros), minlength=histogram.counts_len).astype(counts.dtype)
    histogram.total_count = len(micros)
    histogram.min_value = int(micros.min())
    histogram.max_value = int(micros.max())
    return histogram


def _indexes(histogram: HdrHistogram, micros: np.ndarray) -> np.ndarray:
    # hdrh's _counts_index_for on arrays; the bit length of an integer below 2**53 is frexp's exponent, exactly
    bit_length = np.frexp((micros | histogram.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = bit_length - histogram.unit_magnitude - (histogram.sub_bucket_half_count_magnitude + 1)
    sub_bucket = micros >> (bucket + histogram.unit_magnitude)
    return ((bucket + 1) << histogram.sub_bucket_half_count_magnitude) + sub_bucket - histogram.sub_bucket_half_count


def percentiles_us(histogram: HdrHistogram, percentiles: Iterable[float]) -> list[int]:
    """HdrHistogram's ``get_value_at_percentile`` for each percentile, in one cumulative pass in C: the highest
    value equivalent to the sample at that rank (at percentile 0, the lowest)."""
    counts = histogram.counts[: histogram.get_counts_array_index(histogram.max_value) + 1]
    running = list(accumulate(counts))
    values = []
    for percentile in percentiles:
        index = bisect_left(running, histogram.get_target_count_at_percentile(percentile))
        value = histogram.get_value_from_index(index)
        if percentile:
            values.append(histogram.get_highest_equivalent_value(value))
        else:
            values.append(histogram.get_lowest_equivalent_value(value))
    return values


def mean_us(histogram: HdrHistogram) -> float:
    """HdrHistogram's ``get_mean_value`` (each count at the middle of its bucket), without its slow iterator."""
    counts = histogram.counts[: histogram.get_counts_array_index(histogram.max_value) + 1]
    total = 0
    for index, count in enumerate(counts):
        if count:
            low = histogram.get_value_from_index(index)
            total += count * (low + ((histogram.get_highest_equivalent_value(low) - low + 1) >> 1))
    return total / histogram.total_count


def add(total: HdrHistogram | None, histogram: HdrHistogram) -> HdrHistogram:
    """Add ``histogram`` into a fresh or existing total, widening the total if the new values do not fit.

    An empty histogram adds nothing: hdrh's ``add`` would take its minimum as 0.
    """
    highest = max(histogram.highest_trackable_value, total.highest_trackable_value if total else 0)
    if total is None or highest > total.highest_trackable_value:
        wider = HdrHistogram(histogram.lowest_trackable_value, highest, histogram.significant_figures)
        if total is not None and total.total_count:
            wider.add(total)
        total = wider
    if histogram.total_count:
        total.add(histogram)
    return total


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram | None:
    """One histogram holding all of ``histograms`` (None when there are none)."""
    total = None
    for histogram in histograms:
        total = add(total, histogram)
    return total
