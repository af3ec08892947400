"""The recent seconds of every request name as this process merges them (``LatencyStore.merged_listeners``), kept
as compact HDR counts: the exporter's window of exact quantiles and a disruption's cost while the run goes on."""

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.files import SERVICE
from etcd_users.latency.store import Key


class _Chunk(NamedTuple):
    """Part of one second of one request name: non-zero HDR counts by index, and their exact extremes (µs)."""

    indexes: np.ndarray
    counts: np.ndarray
    min_us: int
    max_us: int


class Window(NamedTuple):
    """The merged seconds ``[first, end)`` of the window, per request name (service series, all types together)."""

    histograms: dict[str, HdrHistogram]  # successes
    successes: dict[str, int]
    failures: dict[str, int]
    seconds: int  # from the window's first second with data to its end


class RecentSeconds:
    """Each merged second of the last ``keep_s`` seconds per request name, as compact HDR counts; older ones go."""

    def __init__(self, keep_s: int) -> None:
        self.keep_s = keep_s
        self._chunks: dict[int, dict[str, list[_Chunk]]] = {}
        self._failures: dict[int, dict[str, int]] = {}
        self._newest = 0

    def add(self, second: int, key: Key, histogram: HdrHistogram | None, failures: int) -> None:
        """A listener of ``LatencyStore.merged_listeners``: a second of a key merged on this process (from a worker or
        its own users)."""
        _type, name, series = key
        if series != SERVICE or second < self._newest - self.keep_s:
            return
        if histogram is not None and histogram.total_count:
            counts = np.ctypeslib.as_array(histogram.counts)
            indexes = np.flatnonzero(counts)
            chunk = _Chunk(indexes, counts[indexes].copy(), histogram.min_value, histogram.max_value)
            self._chunks.setdefault(second, {}).setdefault(name, []).append(chunk)
        if failures:
            per_name = self._failures.setdefault(second, {})
            per_name[name] = per_name.get(name, 0) + failures
        if second > self._newest:
            self._newest = second
            self._forget_before(second - self.keep_s)

    def _forget_before(self, second: int) -> None:
        for seconds in (self._chunks, self._failures):
            for old in [old for old in seconds if old < second]:
                del seconds[old]

    def window(self, end: int, length: int) -> Window:
        """The seconds ``end - length <= s < end`` merged per request name."""
        self._forget_before(end - self.keep_s)
        start = end - length
        histograms: dict[str, HdrHistogram] = {}
        failures: dict[str, int] = {}
        first = end
        for second, per_name in self._chunks.items():
            if not start <= second < end:
                continue
            first = min(first, second)
            for name, chunks in per_name.items():
                histogram = histograms.get(name)
                if histogram is None:
                    histogram = histograms[name] = hdr.new_histogram()
                _add_chunks(histogram, chunks)
        for second, per_name in self._failures.items():
            if not start <= second < end:
                continue
            first = min(first, second)
            for name, count in per_name.items():
                failures[name] = failures.get(name, 0) + count
        successes = {name: histogram.total_count for name, histogram in histograms.items()}
        return Window(histograms, successes, failures, end - first)

    def names(self) -> list[str]:
        return sorted({name for per_name in (*self._chunks.values(), *self._failures.values()) for name in per_name})

    def per_second(self, name: str) -> dict[int, tuple[int, int, HdrHistogram | None]]:
        """Each kept second of ``name``: (successes, failures, the successes' histogram or None), oldest first."""
        seconds = sorted(
            {second for second, per_name in self._chunks.items() if name in per_name}
            | {second for second, per_name in self._failures.items() if name in per_name}
        )
        kept = {}
        for second in seconds:
            chunks = self._chunks.get(second, {}).get(name, ())
            histogram = None
            if chunks:
                histogram = hdr.new_histogram()
                _add_chunks(histogram, chunks)
            successes = histogram.total_count if histogram is not None else 0
            kept[second] = (successes, self._failures.get(second, {}).get(name, 0), histogram)
        return kept


def _add_chunks(histogram: HdrHistogram, chunks: Iterable[_Chunk]) -> None:
    counts = np.ctypeslib.as_array(histogram.counts)
    for chunk in chunks:
        counts[chunk.indexes] += chunk.counts
        total = int(chunk.counts.sum())
        if not histogram.total_count or chunk.min_us < histogram.min_value:
            histogram.min_value = chunk.min_us
        histogram.max_value = max(histogram.max_value, chunk.max_us)
        histogram.total_count += total
