"""The recent seconds of every request name as the master (or single process) merges them, for the cost of a
disruption while the run goes on. Pure: no Locust.

A listener of ``LatencyStore.merged_listeners`` (the same seconds the exact files are written from): each second of
each name keeps its successes' non-zero HDR counts, its failures, and nothing older than ``keep_s`` seconds before
the newest. ``per_second(name)`` gives them back as ``cost.Second`` records.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.disruptions.cost import Second
from etcd_users.files import SERVICE

Key = tuple[str, str, str]


class _Counts(NamedTuple):
    indexes: np.ndarray
    counts: np.ndarray
    min_us: int
    max_us: int


class RecentSeconds:
    def __init__(self, keep_s: int) -> None:
        self.keep_s = keep_s
        self._counts: dict[str, dict[int, list[_Counts]]] = {}
        self._failures: dict[str, dict[int, int]] = {}
        self._newest = 0

    def add(self, second: int, key: Key, histogram: HdrHistogram | None, failures: int) -> None:
        _type, name, series = key
        if series != SERVICE or second < self._newest - self.keep_s:
            return
        if histogram is not None and histogram.total_count:
            counts = np.ctypeslib.as_array(histogram.counts)
            indexes = np.flatnonzero(counts)
            chunk = _Counts(indexes, counts[indexes].copy(), histogram.min_value, histogram.max_value)
            self._counts.setdefault(name, {}).setdefault(second, []).append(chunk)
        if failures:
            per_second = self._failures.setdefault(name, {})
            per_second[second] = per_second.get(second, 0) + failures
        if second > self._newest:
            self._newest = second
            for seconds in (*self._counts.values(), *self._failures.values()):
                for old in [old for old in seconds if old < second - self.keep_s]:
                    del seconds[old]

    def names(self) -> list[str]:
        return sorted(self._counts.keys() | self._failures.keys())

    def per_second(self, name: str) -> dict[int, Second]:
        counts = self._counts.get(name, {})
        failures = self._failures.get(name, {})
        data = {}
        for second in sorted(counts.keys() | failures.keys()):
            histogram = _histogram(counts.get(second, ()))
            successes = histogram.total_count if histogram is not None else 0
            data[second] = Second(successes, failures.get(second, 0), histogram)
        return data


def _histogram(chunks) -> HdrHistogram | None:
    if not chunks:
        return None
    histogram = hdr.new_histogram()
    counts = np.ctypeslib.as_array(histogram.counts)
    for chunk in chunks:
        counts[chunk.indexes] += chunk.counts
        histogram.min_value = chunk.min_us if not histogram.total_count else min(histogram.min_value, chunk.min_us)
        histogram.max_value = max(histogram.max_value, chunk.max_us)
        histogram.total_count += int(chunk.counts.sum())
    return histogram
