"""A latency distribution in milliseconds, either exact (an HDR histogram) or known only at a few percentiles.

The tables and the benchmark report ask the same questions of both kinds: count, min, max, mean, stddev, a
percentile, and how many samples fall in each bucket of a histogram. An exact distribution answers from the
histogram; a percentile-only one (Locust's CSV, or the tool's latency CSV without its log) answers the percentiles
it knows and estimates the rest by assuming samples spread evenly between the known points.
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from hdrh.histogram import HdrHistogram

from etcd_users.hdr import mean_us, percentiles_us

US_PER_MS = 1000.0
_EDGE_TOLERANCE_MS = 1e-9


class LatencyDistribution(ABC):
    """Latencies of one request name (or of all names) over one window, in milliseconds."""

    exact: bool
    count: int
    min_ms: float
    max_ms: float
    mean_ms: float

    @property
    @abstractmethod
    def stddev_ms(self) -> float:
        """Population standard deviation, as etcd's benchmark tool prints it."""

    @abstractmethod
    def percentile(self, percent: float) -> float | None:
        """The latency at ``percent`` (0-100), or None when the source cannot tell."""

    @abstractmethod
    def bucket_counts(self, upper_edges_ms: Sequence[float]) -> list[int]:
        """Samples per bucket: bucket i holds values above edge i-1 up to edge i (bucket 0: up to edge 0)."""


class HdrDistribution(LatencyDistribution):
    """An exact distribution read from an HDR histogram recorded in microseconds.

    Percentiles follow HdrHistogram's convention (the highest value equivalent to the sample at that rank; at 0,
    the lowest), and the mean counts each sample at the middle of its bucket. Both come from `etcd_users.hdr`, the
    code the recording side writes its latency CSV with, so the two agree by construction.
    """

    exact = True

    def __init__(self, histogram: HdrHistogram) -> None:
        self.histogram = histogram
        self.count = histogram.get_total_count()
        self.min_ms = histogram.get_min_value() / US_PER_MS
        self.max_ms = histogram.get_max_value() / US_PER_MS
        self.mean_ms = mean_us(histogram) / US_PER_MS if self.count else 0.0

    @property
    def stddev_ms(self) -> float:
        return self.histogram.get_stddev() / US_PER_MS

    def percentile(self, percent: float) -> float | None:
        return self.percentiles([percent])[percent]

    def percentiles(self, percents: Sequence[float]) -> dict[float, float | None]:
        """Several percentiles in one pass over the histogram (None for each when it is empty)."""
        percents = list(percents)
        if not self.count:
            return dict.fromkeys(percents)
        values = percentiles_us(self.histogram, percents)
        return {percent: value / US_PER_MS for percent, value in zip(percents, values, strict=True)}

    def bucket_counts(self, upper_edges_ms: Sequence[float]) -> list[int]:
        counts = [0] * len(upper_edges_ms)
        for item in self.histogram.get_recorded_iterator():
            # Each HDR bin stands for its lowest value: the recorded value itself wherever the bin is 1 us wide.
            value_ms = self.histogram.get_lowest_equivalent_value(item.value_iterated_to) / US_PER_MS
            # The tolerance keeps a value equal to an edge in that edge's bucket despite float rounding.
            index = min(bisect.bisect_left(upper_edges_ms, value_ms - _EDGE_TOLERANCE_MS), len(counts) - 1)
            counts[index] += item.count_at_value_iterated_to
        return counts


class PercentileDistribution(LatencyDistribution):
    """A distribution known only at some percentiles (plus count, min, mean and max).

    Between two known points the samples are assumed to spread evenly: that gives the histogram's bucket counts
    and the standard deviation as estimates. Only the known percentiles are answered.
    """

    exact = False

    def __init__(self, count: int, min_ms: float, mean_ms: float, max_ms: float, known: Mapping[float, float]) -> None:
        self.count = int(count)
        self.min_ms = float(min_ms)
        self.mean_ms = float(mean_ms)
        self.max_ms = float(max_ms)
        self.known = {float(p): float(v) for p, v in known.items() if v is not None and not math.isnan(v)}
        # The cumulative curve through (0 %, min), the known points and (100 %, max); Locust's whole-millisecond
        # rounding can make neighbours disagree, so keep it non-decreasing.
        points = sorted({0.0: self.min_ms, **self.known, 100.0: self.max_ms}.items())
        self._cdf: list[tuple[float, float]] = []
        highest = -math.inf
        for percent, value in points:
            highest = max(highest, value)
            self._cdf.append((percent / 100, highest))

    @property
    def stddev_ms(self) -> float:
        first = second = 0.0
        for (f0, v0), (f1, v1) in zip(self._cdf, self._cdf[1:], strict=False):
            weight = f1 - f0
            first += weight * (v0 + v1) / 2
            second += weight * (v0 * v0 + v0 * v1 + v1 * v1) / 3
        return math.sqrt(max(second - first * first, 0.0))

    def percentile(self, percent: float) -> float | None:
        return self.known.get(float(percent))

    def _fraction_at_or_below(self, value_ms: float) -> float:
        if value_ms < self._cdf[0][1]:
            return 0.0
        fraction = 0.0
        for (f0, v0), (f1, v1) in zip(self._cdf, self._cdf[1:], strict=False):
            if value_ms >= v1:
                fraction = f1
            elif value_ms > v0:
                fraction = f0 + (f1 - f0) * (value_ms - v0) / (v1 - v0)
                break
        return fraction

    def bucket_counts(self, upper_edges_ms: Sequence[float]) -> list[int]:
        if not self.count:
            return [0] * len(upper_edges_ms)
        # The minimum was observed, so the first bucket holds at least that sample; spread the rest.
        rest = self.count - 1
        cumulative = [self._fraction_at_or_below(edge) * rest for edge in upper_edges_ms]
        cumulative[-1] = rest
        shares = [cumulative[0]] + [b - a for a, b in zip(cumulative, cumulative[1:], strict=False)]
        counts = _round_keeping_total(shares, rest)
        counts[0] += 1
        return counts


def _round_keeping_total(shares: list[float], total: int) -> list[int]:
    """Round shares to integers that still add up to ``total`` (largest remainders get the leftovers)."""
    floors = [math.floor(max(share, 0.0)) for share in shares]
    leftover = total - sum(floors)
    by_remainder = sorted(range(len(shares)), key=lambda i: shares[i] - floors[i], reverse=True)
    for index in by_remainder[: max(leftover, 0)]:
        floors[index] += 1
    return floors
