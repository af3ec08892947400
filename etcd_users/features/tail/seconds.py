"""The run's exact latency per second, as the latency store merges it (``LatencyStore.merged_listeners``): every
request name's service time in one histogram per second, reduced to its P99, requests and errors once the second is
old enough that no worker report adds to it. Memory stays bounded on hour-long runs: a few numbers per second."""

from __future__ import annotations

from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.files import SERVICE
from etcd_users.latency.store import Key

OPEN_SECONDS = 15  # a second's histogram is kept this long after the newest merged (workers report every 3 s)


@dataclass
class Second:
    second: int  # unix second
    p99_ms: float | None
    requests: int
    errors: int
    max_ms: float | None = None  # the slowest request that ended in it
    waited_ms: float | None = None  # a second in which nothing ended: the longest request on the wire through it


class SecondsKept:
    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.closed: dict[int, Second] = {}
        self._open: dict[int, tuple[HdrHistogram | None, int]] = {}  # second -> (histogram, failures)
        self._newest = 0

    def add(self, second: int, key: Key, histogram: HdrHistogram | None, failures: int) -> None:
        """A listener of ``LatencyStore.merged_listeners``."""
        if key[2] != SERVICE:
            return
        if second in self.closed:  # a report later than the grace: its counts, not its latencies
            kept = self.closed[second]
            kept.requests += failures + (histogram.total_count if histogram is not None else 0)
            kept.errors += failures
            return
        merged, failed = self._open.get(second, (None, 0))
        if histogram is not None and histogram.total_count:
            merged = hdr.add(merged, histogram)
        self._open[second] = (merged, failed + failures)
        if second > self._newest:
            self._newest = second
            self._close(second - OPEN_SECONDS)

    def _close(self, before: int | None) -> None:
        for second in sorted(self._open):
            if before is not None and second >= before:
                break
            histogram, failures = self._open.pop(second)
            self.closed[second] = _second(second, histogram, failures)

    def so_far(self) -> dict[int, Second]:
        """Every second so far, the open ones as they stand (a live view: nothing is closed)."""
        found = dict(self.closed)
        for second, (histogram, failures) in list(self._open.items()):
            found[second] = _second(second, histogram, failures)
        return found

    def all(self) -> dict[int, Second]:
        """Every second so far, closed."""
        self._close(None)
        return self.closed


def _second(second: int, histogram: HdrHistogram | None, failures: int) -> Second:
    count = histogram.total_count if histogram is not None else 0
    if not count:
        return Second(second, None, failures, failures)
    p99 = hdr.percentiles_us(histogram, [99.0])[0] / 1000.0
    return Second(second, p99, count + failures, failures, max_ms=histogram.get_max_value() / 1000.0)
