"""The exact latencies of one process: per-second HDR histograms while recording, their merge across workers, and
the run's totals. Pure: no Locust (``recorder`` binds it to Locust's events).

Recording keeps a second's latencies in lists and makes them histograms when the second closes
(``hdr.histogram_of``): the thread that runs every user pays two list appends per success (its latency, and its end
for the timeline). Workers ship the seconds
closed since their last report (``export_report``); the master merges them (``merge_report``), which gives the same
figures as one process that saw every request. Merged seconds wait in ``pending`` until they are sealed for the
files. Seconds merged into a window that is open (``windows``: a load shape's level being judged) are also
merged into that window's histograms.

``Count`` includes failures (as Locust's request count does); failures have no latency.

With ``fine`` set (a run with ``--etcd-disrupt``) a closed second also yields its part of the timeline
(``etcd_users.latency.timeline``: its successes' 10 ms slots, 100 ms histograms, timed failures), shipped with the
report and merged into ``timeline`` on the master.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.files import AGGREGATED, INTENDED, LATENCY_SUMMARY_PERCENTILES, SERVICE
from etcd_users.latency import timeline
from etcd_users.latency.timeline import Timeline
from etcd_users.latency.windows import Windows

logger = logging.getLogger(__name__)

INTENDED_CONTEXT_KEY = "intended_response_time"

Key = tuple[str, str, str]  # (request type, name, series)

_now = time.time


class LatencyRow(NamedTuple):
    """One (type, name, series) over the run. Latencies in ms; None when no request of the key succeeded."""

    type: str
    name: str
    series: str
    count: int  # requests, failures included
    failures: int
    min_ms: float | None
    mean_ms: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    p9999: float | None
    max_ms: float | None


class SealedInterval(NamedTuple):
    """One second of one key, final: what a history row and an hlog interval are made of."""

    second: int
    key: Key
    histogram: HdrHistogram | None  # None when every request of that second failed
    failures: int


def summary_row(key: Key, histogram: HdrHistogram | None, failures: int) -> LatencyRow:
    if histogram is None or not histogram.total_count:
        return LatencyRow(*key, failures, failures, *([None] * 9))
    values = hdr.percentiles_us(histogram, LATENCY_SUMMARY_PERCENTILES)
    return LatencyRow(
        *key,
        histogram.total_count + failures,
        failures,
        histogram.get_min_value() / 1000.0,
        hdr.mean_us(histogram) / 1000.0,
        *(value / 1000.0 for value in values),
        histogram.get_max_value() / 1000.0,
    )


class LatencyStore:
    """Recording side (every process) and merged side (master or single process) of the exact latencies."""

    def __init__(self) -> None:
        # told of each second of each key as it is merged (histogram or None, failures): the live exporter's window,
        # the disruptions' cost
        self.merged_listeners: list[Callable[[int, Key, HdrHistogram | None, int], None]] = []
        self.fine = False  # record the timeline's parts (set per run: a run with --etcd-disrupt)
        self.timeline: Timeline | None = None  # the merged timeline, on a master or single process that keeps one
        self.reset()

    # -- recording (hot path) --

    def record(
        self,
        request_type: str,
        name: str,
        response_time: float,
        exception: Any = None,
        context: Any = None,
        **_kwargs: Any,
    ) -> None:
        """Listener of Locust's ``request`` event; ``response_time`` and the intended time in ms, unrounded."""
        intended = context.get(INTENDED_CONTEXT_KEY) if context else None
        self.record_at(_now(), request_type, name, response_time, exception, intended)

    def record_batch(self, request_type: str, results) -> None:
        """The ready workloads' results, each at the time it ended (``etcd_users.features.engine.results``): (name,
        seconds, ended at time.time() seconds, response length, error label or None, intended seconds or None)."""
        record_at = self.record_at
        for name, seconds, at, _length, label, intended in results:
            record_at(at, request_type, name, seconds * 1000.0, label, None if intended is None else intended * 1000.0)

    def record_at(
        self,
        now: float,
        request_type: str,
        name: str,
        response_time: float | None,
        exception: Any,
        intended_ms: float | None,
    ) -> None:
        """One request that ended at ``now`` (time.time() seconds); latencies in ms, unrounded."""
        second = int(now)
        if second != self._open_second:
            self._roll(second)
        last = self.last_request
        if last is None:
            self.first_request = self.last_request = now
        elif now > last:
            self.last_request = now
        elif now < self.first_request:  # a batch of the loop's results ended before a greenlet's request
            self.first_request = now
        if exception is not None:
            self._count_failure(request_type, name, intended_ms is not None)
            sent = now - response_time / 1000.0 if response_time else now
            timed = (name, str(exception), timeline.slot_of(sent), timeline.slot_of(now))
            self._open_timed_failures[timed] = self._open_timed_failures.get(timed, 0) + 1
            return
        if response_time is None:
            return  # Locust allows a request without a response time; it has no latency to count
        key = (request_type, name, SERVICE)
        latencies = self._open.get(key)
        if latencies is None:
            latencies = self._open[key] = []
        latencies.append(response_time)
        latencies.append(now)  # its end, for the timeline: a service list alternates latency and end
        if intended_ms is not None:
            self._record_intended(request_type, name, intended_ms)

    def _record_intended(self, request_type: str, name: str, intended_ms: float) -> None:
        key = (request_type, name, INTENDED)
        latencies = self._open.get(key)
        if latencies is None:
            latencies = self._open[key] = []
        latencies.append(intended_ms)

    def _count_failure(self, request_type: str, name: str, scheduled: bool) -> None:
        failures = self._open_failures
        key = (request_type, name, SERVICE)
        failures[key] = failures.get(key, 0) + 1
        if scheduled:
            key = (request_type, name, INTENDED)
            failures[key] = failures.get(key, 0) + 1

    def _roll(self, second: int) -> None:
        """Close the recorded second (or the part of it recorded so far) and continue in ``second``."""
        if self._open or self._open_failures:
            histograms = {
                key: hdr.histogram_of(values[0::2] if key[2] == SERVICE else values)
                for key, values in self._open.items()
            }
            part = None
            if self.fine:
                service = {key: values for key, values in self._open.items() if key[2] == SERVICE}
                part = timeline.second_part(service, self._open_timed_failures)
            self._closed.append((self._open_second, histograms, self._open_failures, part))
            self._open, self._open_failures, self._open_timed_failures = {}, {}, {}
        self._open_second = second

    def _take_closed(self) -> list[tuple[int, dict[Key, HdrHistogram], dict[Key, int], dict | None]]:
        self._roll(self._open_second)
        closed, self._closed = self._closed, []
        return closed

    # -- between processes --

    def export_report(self) -> dict[str, Any]:
        """Everything recorded since the last export, encoded for the master; forgets it."""
        intervals = []
        failures = []
        parts = []
        for second, histograms, failure_counts, part in self._take_closed():
            for key, histogram in histograms.items():
                intervals.append([second, *key, histogram.encode().decode("ascii")])
            for key, count in failure_counts.items():
                failures.append([second, *key, count])
            if part is not None:
                parts.append(part)
        # "at": everything recorded before it is in this report (the master's judge waits for a report past a window)
        return {
            "intervals": intervals,
            "failures": failures,
            "timeline": parts,
            "first": self.first_request,
            "last": self.last_request,
            "at": _now(),
        }

    def merge_report(self, report: dict[str, Any]) -> None:
        """Add a worker's ``export_report()`` to the run's histograms."""
        first, last = report.get("first"), report.get("last")
        if first is not None and self._summary_reset_at is not None:
            first = max(first, self._summary_reset_at)  # workers' first requests predate the master's "Reset stats"
        if first is not None and (self.first_request is None or first < self.first_request):
            self.first_request = first
        if last is not None and (self.last_request is None or last > self.last_request):
            self.last_request = last
        for second, request_type, name, series, payload in report.get("intervals", ()):
            self._add_interval(second, (request_type, name, series), HdrHistogram.decode(payload))
        for second, request_type, name, series, count in report.get("failures", ()):
            self._add_failures(second, (request_type, name, series), count)
        if self.timeline is not None:
            for part in report.get("timeline", ()):
                self.timeline.add(part)

    def fold_recorded(self) -> None:
        """Fold this process's own recorded seconds into the run's histograms (a master's or single process's)."""
        for second, histograms, failure_counts, part in self._take_closed():
            for key, histogram in histograms.items():
                self._add_interval(second, key, histogram)
            for key, count in failure_counts.items():
                self._add_failures(second, key, count)
            if part is not None and self.timeline is not None:
                self.timeline.add(part)

    def _add_interval(self, second: int, key: Key, histogram: HdrHistogram) -> None:
        if not histogram.total_count:
            return  # hdrh's add() would take an empty histogram's minimum as 0
        cumulative = self._cumulative.get(key)
        if cumulative is None:
            cumulative = self._cumulative[key] = hdr.new_histogram()
        cumulative.add(histogram)
        per_second = self._pending.setdefault(second, {})
        if key in per_second:
            per_second[key].add(histogram)
        else:
            per_second[key] = histogram  # no longer recorded into: owned from here on
        if self.windows:
            self.windows.add(second, key, histogram)
        for listener in self.merged_listeners:
            listener(second, key, histogram, 0)
        if second <= self._last_sealed_second:
            logger.debug("latency of %s at %d arrived after that second was written; appended again", key, second)

    def _add_failures(self, second: int, key: Key, count: int) -> None:
        self._failures[key] = self._failures.get(key, 0) + count
        per_second = self._pending_failures.setdefault(second, {})
        per_second[key] = per_second.get(key, 0) + count
        if self.windows:
            self.windows.add_failures(second, key, count)
        for listener in self.merged_listeners:
            listener(second, key, None, count)

    # -- reading the merged side --

    def snapshot(self) -> list[LatencyRow]:
        """One row per (type, name, series), sorted, then the ``Aggregated`` row of all service histograms."""
        keys = sorted(self._cumulative.keys() | self._failures.keys())
        rows = [summary_row(key, self._cumulative.get(key), self._failures.get(key, 0)) for key in keys]
        aggregated = hdr.new_histogram()
        aggregated_failures = 0
        for key in keys:
            if key[2] == SERVICE:
                if key in self._cumulative:
                    aggregated.add(self._cumulative[key])
                aggregated_failures += self._failures.get(key, 0)
        rows.append(summary_row(("", AGGREGATED, SERVICE), aggregated, aggregated_failures))
        return rows

    def histogram(self, request_type: str, name: str, series: str = SERVICE) -> HdrHistogram | None:
        """The run's histogram of one key (microseconds; do not modify it), None before its first success."""
        return self._cumulative.get((request_type, name, series))

    def histograms(self, series: str = SERVICE) -> dict[Key, HdrHistogram]:
        """The run's histogram of every key of ``series`` (do not modify them)."""
        return {key: histogram for key, histogram in self._cumulative.items() if key[2] == series}

    def seal(self, horizon: int | None) -> list[SealedInterval]:
        """Take the pending seconds before ``horizon`` (all when None) out of memory, in file order."""
        seconds = sorted(self._pending.keys() | self._pending_failures.keys())
        if horizon is not None:
            seconds = [second for second in seconds if second < horizon]
        sealed = []
        for second in seconds:
            histograms = self._pending.pop(second, {})
            failures = self._pending_failures.pop(second, {})
            for key in sorted(histograms.keys() | failures.keys()):
                sealed.append(SealedInterval(second, key, histograms.get(key), failures.get(key, 0)))
            self._last_sealed_second = max(self._last_sealed_second, second)
        return sealed

    # -- a run's life --

    def reset(self) -> None:
        """Forget everything: a new run starts (on a worker, what is left is the previous run's tail)."""
        # Recording side: the current second (its latencies in ms, made a histogram when it closes; a service list
        # alternates latency and end time), and the seconds closed since the last fold or report.
        self._open_second = 0
        self._open: dict[Key, list[float]] = {}
        self._open_failures: dict[Key, int] = {}
        self._closed: list[tuple[int, dict[Key, HdrHistogram], dict[Key, int], dict | None]] = []
        # the open second's failures by (name, etcd's label, 10 ms slot sent, slot ended), for the timeline
        self._open_timed_failures: dict[timeline.FailureKey, int] = {}
        # Merged side: the run's totals, and the seconds not yet written out.
        self._pending: dict[int, dict[Key, HdrHistogram]] = {}
        self._pending_failures: dict[int, dict[Key, int]] = {}
        self._last_sealed_second = -1
        self.windows = Windows(lambda: _now())  # late-bound: tests set the module's clock
        self.started_at = _now()
        self.reset_summary()
        self._summary_reset_at: float | None = None

    def reset_summary(self) -> None:
        """Forget the run's totals, keep its per-second history (Locust's "Reset stats")."""
        self._cumulative: dict[Key, HdrHistogram] = {}
        self._failures: dict[Key, int] = {}
        # when the run's first and last requests were recorded here (or, merged, anywhere)
        self.first_request: float | None = None
        self.last_request: float | None = None
        self._summary_reset_at = _now()
