"""The statistics of the comparison over one run's seconds: a moving-block bootstrap, exact percentiles of the merged
HDR histograms of resampled seconds (and of each second alone), and Student's t for a calibration's runs (the
repeats' rank test is ``analysis.rank_test``). Pure numpy, seeded: the same input gives the same intervals.

Why blocks: etcd's seconds are not independent (a compaction, a slow fsync, Go's garbage collector or a noisy
neighbour spans several seconds), and resampling single seconds would make the interval too narrow. A block of
``ceil(n ** (1/3))`` consecutive seconds (the usual rate for a moving-block bootstrap) keeps that correlation; blocks
never cross from one run into another.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

from etcd_users.hdr import new_histogram

CONFIDENCE = 0.95
REPLICATES = 1000
SEED = 20_240_617

# Student's t at 97.5 % (two-sided 95 %) for 1..30 degrees of freedom; the normal 1.96 beyond
_T975 = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228),
    *(2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086),
    *(2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)
_REFERENCE = new_histogram()  # index -> value: the same for every histogram of the tool (1 µs, 3 figures)


def generator(*key: str) -> np.random.Generator:
    """A generator seeded from ``SEED`` and ``key`` (a row and a side): each row's draws are its own, whatever the
    order the rows are computed in."""
    return np.random.default_rng([SEED, zlib.crc32("\x1f".join(key).encode())])


def block_length(seconds: int) -> int:
    return max(1, math.ceil(seconds ** (1 / 3)))


def block_weights(lengths: Sequence[int], rng: np.random.Generator, replicates: int = REPLICATES) -> np.ndarray:
    """How often each second is drawn in each replicate: (replicates, sum(lengths)). Each run of ``lengths`` is
    resampled on its own with moving blocks and keeps its number of seconds."""
    parts = []
    for length in lengths:
        block = min(block_length(length), length)
        count = math.ceil(length / block)
        starts = rng.integers(0, length - block + 1, size=(replicates, count))
        picked = (starts[:, :, None] + np.arange(block)).reshape(replicates, -1)[:, :length]
        weights = np.zeros((replicates, length))
        np.add.at(weights, (np.repeat(np.arange(replicates), length), picked.ravel()), 1.0)
        parts.append(weights)
    return np.hstack(parts) if parts else np.zeros((replicates, 0))


class LatencyCounts:
    """The seconds' histograms as one dense matrix over the buckets any of them uses: (seconds, buckets)."""

    def __init__(self, histograms: Sequence[HdrHistogram | None]):
        rows = [_counts(histogram) for histogram in histograms]
        width = max((len(row) for row in rows), default=0)
        dense = np.zeros((len(rows), width))
        for index, row in enumerate(rows):
            dense[index, : len(row)] = row
        used = np.flatnonzero(dense.sum(axis=0))
        self.matrix = dense[:, used]
        self.values_us = np.array(
            [_REFERENCE.get_highest_equivalent_value(_REFERENCE.get_value_from_index(int(i))) for i in used], float
        )

    def percentiles_ms(self, weights: np.ndarray, percentiles: Sequence[float]) -> np.ndarray:
        """Per row of ``weights`` (one per replicate, a weight per second) the percentiles of the merged histogram,
        as HdrHistogram reports them (the highest value equivalent to the sample at the rank), in ms:
        (rows, len(percentiles)); NaN for a row with no latency."""
        weights = np.atleast_2d(weights)
        if not self.matrix.size:
            return np.full((len(weights), len(percentiles)), np.nan)
        return self._percentiles_of(weights @ self.matrix, percentiles)

    def each_second_ms(self, percentiles: Sequence[float]) -> np.ndarray:
        """The percentiles of each second's own histogram, in ms: (seconds, len(percentiles)); NaN for a second
        with no latency."""
        if not self.matrix.size:
            return np.full((len(self.matrix), len(percentiles)), np.nan)
        return self._percentiles_of(self.matrix, percentiles)

    def _percentiles_of(self, counts: np.ndarray, percentiles: Sequence[float]) -> np.ndarray:
        """Per row of ``counts`` (a histogram over ``values_us``) its percentiles in ms, NaN for an empty row."""
        result = np.full((len(counts), len(percentiles)), np.nan)
        cumulative = np.cumsum(counts, axis=1)
        totals = cumulative[:, -1]
        for column, percentile in enumerate(percentiles):
            targets = np.maximum(np.floor(percentile * totals / 100 + 0.5), 1)
            index = (cumulative < targets[:, None] - 1e-9).sum(axis=1)
            values = self.values_us[np.minimum(index, len(self.values_us) - 1)] / 1000
            result[:, column] = np.where(totals > 0, values, np.nan)
        return result


def _counts(histogram: HdrHistogram | None) -> np.ndarray:
    if histogram is None or not histogram.get_total_count():
        return np.zeros(0)
    if histogram.lowest_trackable_value != 1 or histogram.significant_figures != 3:
        raise ValueError("histograms of another precision than the tool's (1 µs, 3 significant figures)")
    counts = np.ctypeslib.as_array(histogram.counts)
    return counts[: histogram.get_counts_array_index(histogram.max_value) + 1].astype(float)


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of the replicates (NaN ones left out)."""
    finite = replicates[np.isfinite(replicates)]
    if not len(finite):
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def t_quantile(degrees: float) -> float:
    """Student's t at 97.5 % for ``degrees`` of freedom, rounded down to a whole number (the wider interval)."""
    whole = max(1, math.floor(degrees))
    return _T975[whole - 1] if whole <= len(_T975) else 1.96
