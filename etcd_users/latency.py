"""Exact latencies: every request in HDR histograms (microseconds, 3 significant digits), merged across workers.

Locust rounds response times to whole milliseconds and reports integer percentiles, too coarse for etcd's
0.2-15 ms. This module records each request of the ``request`` event a second time, per (type, name, series):

- ``service``: the response time the user measured;
- ``intended``: ``context["intended_response_time"]``, latency from the intended send time (rate-driven users).

Histograms are kept per wall-clock second. Workers ship the seconds recorded since their last report with
Locust's own report (``report_to_master``); the master merges them, which gives the same figures as one process
that saw every request. The master (or the single process) writes, with ``--csv PREFIX``:

- ``PREFIX_latency.csv``: one row per (type, name, series) over the run, plus an ``Aggregated`` row;
- ``PREFIX_latency_history.csv``: one row per second per key;
- ``PREFIX_latency.hlog``: the per-second histograms as an HdrHistogram interval log, for standard HDR tools.

``Count`` and ``Requests`` include failures (as Locust's request count does); failures have no latency.
The files are refreshed every few seconds and completed at ``quit``, once the workers' last reports are in. On a
master a second is written when it is 5 s old; a worker report later than that adds a second row for its second.

Read it with ``recorder(environment).snapshot()`` (rows as in the CSV) or ``.histogram(type, name, series)``.
"""

from locust import events
from locust import runners as locust_runners
from locust.env import Environment
from locust.exception import RPCError

import csv
import logging
import os
import re
import time
from bisect import bisect_left
from collections.abc import Iterable
from datetime import datetime
from itertools import accumulate
from typing import Any, NamedTuple, TextIO

import gevent
import gevent.lock
import numpy as np
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

logger = logging.getLogger(__name__)

SERVICE = "service"
INTENDED = "intended"
INTENDED_CONTEXT_KEY = "intended_response_time"
AGGREGATED = "Aggregated"

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_FIGURES = 3

REPORT_KEY = "etcd_latency"
REFRESH_SECONDS = 2.0
LAST_REPORTS_TIMEOUT_SECONDS = 10.0
# On the master a second is written once every worker has had the time to report it (reports every 3 s).
LATE_GRACE_SECONDS = 2.0

SUMMARY_COLUMNS = (
    *("Type", "Name", "Series", "Count", "Failures", "Min", "Mean"),
    *("P50", "P90", "P95", "P99", "P99.9", "P99.99", "Max"),
    # the run's first and last request (unix seconds, all names): its exact duration, for QPS
    *("First", "Last"),
)
SUMMARY_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99)
HISTORY_COLUMNS = ("Timestamp", "Type", "Name", "Series", "Requests", "Failures", "QPS", "P50", "P99", "P99.9", "Max")
HISTORY_PERCENTILES = (50.0, 99.0, 99.9)

Key = tuple[str, str, str]  # (request type, name, series)

_now = time.time
_UNSAFE_TAG_CHARACTERS = re.compile(r"[\s,]")


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


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def histogram_of(latencies_ms: list[float]) -> HdrHistogram:
    """Latencies in ms as whole microseconds (rounded half to even, clamped to the histogram's range), counted as
    hdrh's ``record_value`` of each would count them, in a few array operations.

    Recording each request as it comes costs about a microsecond of Python on the thread that runs every user; a
    second's latencies are kept in a list instead and counted here once, when the second closes.
    """
    histogram = new_histogram()
    if not latencies_ms:
        return histogram
    micros = np.clip(np.rint(np.asarray(latencies_ms, dtype=np.float64) * 1000.0), LOWEST_US, HIGHEST_US)
    micros = micros.astype(np.int64)
    # hdrh's _counts_index_for on arrays; the bit length of an integer below 2**53 is frexp's exponent, exactly
    bit_length = np.frexp((micros | histogram.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = bit_length - histogram.unit_magnitude - (histogram.sub_bucket_half_count_magnitude + 1)
    sub_bucket = micros >> (bucket + histogram.unit_magnitude)
    index = ((bucket + 1) << histogram.sub_bucket_half_count_magnitude) + sub_bucket - histogram.sub_bucket_half_count
    counts = np.ctypeslib.as_array(histogram.counts)
    counts += np.bincount(index, minlength=histogram.counts_len).astype(counts.dtype)
    histogram.total_count = len(micros)
    histogram.min_value = int(micros.min())
    histogram.max_value = int(micros.max())
    return histogram


def percentiles_us(histogram: HdrHistogram, percentiles: Iterable[float]) -> list[int]:
    """HdrHistogram's ``get_value_at_percentile`` for each percentile (> 0), in one cumulative pass in C."""
    counts = histogram.counts[: histogram.get_counts_array_index(histogram.max_value) + 1]
    running = list(accumulate(counts))
    values = []
    for percentile in percentiles:
        index = bisect_left(running, histogram.get_target_count_at_percentile(percentile))
        values.append(histogram.get_highest_equivalent_value(histogram.get_value_from_index(index)))
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


def summary_row(key: Key, histogram: HdrHistogram | None, failures: int) -> LatencyRow:
    if histogram is None or not histogram.total_count:
        return LatencyRow(*key, failures, failures, *([None] * 9))
    values = percentiles_us(histogram, SUMMARY_PERCENTILES)
    return LatencyRow(
        *key,
        histogram.total_count + failures,
        failures,
        histogram.get_min_value() / 1000.0,
        mean_us(histogram) / 1000.0,
        *(value / 1000.0 for value in values),
        histogram.get_max_value() / 1000.0,
    )


def format_ms(value_ms: float | None) -> str:
    """Milliseconds with 3 decimals (microsecond precision); empty when there is no value."""
    return "" if value_ms is None else f"{value_ms:.3f}"


def summary_fields(row: LatencyRow, first: float | None = None, last: float | None = None) -> list[str | int]:
    """The ``_latency.csv`` fields of a row, in SUMMARY_COLUMNS order."""
    window = ["" if moment is None else f"{moment:.3f}" for moment in (first, last)]
    return [row.type, row.name, row.series, row.count, row.failures, *map(format_ms, row[5:]), *window]


def history_fields(interval: SealedInterval) -> list[str | int | float]:
    """The ``_latency_history.csv`` fields of one second of one key, in HISTORY_COLUMNS order."""
    histogram = interval.histogram
    successes = histogram.total_count if histogram is not None else 0
    requests = successes + interval.failures
    if successes:
        latencies = [*percentiles_us(histogram, HISTORY_PERCENTILES), histogram.get_max_value()]
        latency_fields = [format_ms(value / 1000.0) for value in latencies]
    else:
        latency_fields = [""] * (len(HISTORY_PERCENTILES) + 1)
    return [interval.second, *interval.key, requests, interval.failures, float(requests), *latency_fields]


def hlog_tag(key: Key) -> str:
    """``TYPE:NAME:SERIES``; HdrHistogram log tags may not hold commas or whitespace."""
    return _UNSAFE_TAG_CHARACTERS.sub("_", ":".join(key))


class TaggedLogWriter(HistogramLogWriter):
    """hdrh's interval log writer plus what its Python port lacks: tagged intervals and a working StartTime line."""

    def output_start_time(self, start_time_msec: float) -> None:
        # hdrh's version reads the time as seconds and calls a method datetime does not have
        seconds = start_time_msec / 1000.0
        self.log.write(f"#[StartTime: {seconds:.3f} (seconds since epoch), {datetime.fromtimestamp(seconds)}]\n")

    def output_tagged_interval(
        self, tag: str, histogram: HdrHistogram, start_sec: float, length_sec: float, max_value_unit_ratio: float
    ) -> None:
        """One interval line as the Java writer prints it: ``Tag=T,start,length,max,payload`` (start from base time)."""
        payload = histogram.encode().decode("ascii")
        interval_max = histogram.get_max_value() / max_value_unit_ratio
        self.log.write(f"Tag={tag},{start_sec:.3f},{length_sec:.3f},{interval_max:.3f},{payload}\n")


class OutputFiles:
    """The three files of one run: the summary is rewritten whole, history and hlog are appended second by second."""

    def __init__(self, prefix: str, started_at: float) -> None:
        self.summary_path = prefix + "_latency.csv"
        self.history_path = prefix + "_latency_history.csv"
        self.hlog_path = prefix + "_latency.hlog"
        self._base_second = int(started_at)
        self._history: TextIO | None = open(self.history_path, "w", newline="")
        self._hlog: TextIO | None = open(self.hlog_path, "w")
        csv.writer(self._history).writerow(HISTORY_COLUMNS)
        writer = TaggedLogWriter(self._hlog)
        writer.output_comment("[Histogram log format version 1.3]")
        # Both on the whole second: readers skip intervals that start before StartTime.
        writer.output_start_time(self._base_second * 1000.0)
        writer.output_base_time(self._base_second * 1000.0)
        writer.output_comment("Values are latencies in microseconds, Interval_Max in milliseconds.")
        writer.output_comment("Tags are TYPE:NAME:SERIES; one interval per second per tag.")
        writer.output_legend()
        self._flush()

    def append(self, intervals: list[SealedInterval]) -> None:
        if self._history is None or self._hlog is None:
            # written again after close(): add to what is there
            self._history = open(self.history_path, "a", newline="")
            self._hlog = open(self.hlog_path, "a")
        history = csv.writer(self._history)
        hlog = TaggedLogWriter(self._hlog)
        for interval in intervals:
            history.writerow(history_fields(interval))
            if interval.histogram is not None:
                start = float(interval.second - self._base_second)
                hlog.output_tagged_interval(hlog_tag(interval.key), interval.histogram, start, 1.0, 1000.0)
        self._flush()

    def write_summary(self, rows: list[LatencyRow], first: float | None = None, last: float | None = None) -> None:
        # Replaced whole and atomically: a reader never sees half a file.
        partial = self.summary_path + ".partial"
        with open(partial, "w", newline="") as summary:
            writer = csv.writer(summary)
            writer.writerow(SUMMARY_COLUMNS)
            writer.writerows(summary_fields(row, first, last) for row in rows)
        os.replace(partial, self.summary_path)

    def _flush(self) -> None:
        for handle in (self._history, self._hlog):
            if handle is not None:
                handle.flush()

    def close(self) -> None:
        for handle in (self._history, self._hlog):
            if handle is not None:
                handle.close()
        self._history = self._hlog = None


class LatencyRecorder:
    """The histograms of one environment (one per process); see the module docstring."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        # Recording side, every process: the current second (its latencies in ms, made a histogram when it closes),
        # and seconds closed since the last fold or report.
        self._open_second = 0
        self._open: dict[Key, list[float]] = {}
        self._open_failures: dict[Key, int] = {}
        self._closed: list[tuple[int, dict[Key, HdrHistogram], dict[Key, int]]] = []
        # Merged side, master or single process.
        self._cumulative: dict[Key, HdrHistogram] = {}
        self._failures: dict[Key, int] = {}
        self._pending: dict[int, dict[Key, HdrHistogram]] = {}  # seconds not yet written out
        self._pending_failures: dict[int, dict[Key, int]] = {}
        self._last_sealed_second = -1
        self._started_at = _now()
        # when the run's first and last requests were recorded here (or, merged, anywhere)
        self.first_request: float | None = None
        self.last_request: float | None = None
        self._stats_reset_at: float | None = None
        self._outputs: OutputFiles | None = None
        self._refresher: gevent.Greenlet | None = None
        self._late_reports_received = False
        self._late_reports_lock = gevent.lock.Semaphore()

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
        now = _now()
        second = int(now)
        if second != self._open_second:
            self._roll(second)
        if self.first_request is None:
            self.first_request = now
        self.last_request = now
        if exception is not None:
            self._count_failure(request_type, name, context)
            return
        if response_time is None:
            return  # Locust allows a request without a response time; it has no latency to count
        key = (request_type, name, SERVICE)
        latencies = self._open.get(key)
        if latencies is None:
            latencies = self._open[key] = []
        latencies.append(response_time)
        if context and INTENDED_CONTEXT_KEY in context:
            self._record_intended(request_type, name, context[INTENDED_CONTEXT_KEY])

    def _record_intended(self, request_type: str, name: str, intended_ms: float) -> None:
        key = (request_type, name, INTENDED)
        latencies = self._open.get(key)
        if latencies is None:
            latencies = self._open[key] = []
        latencies.append(intended_ms)

    def _count_failure(self, request_type: str, name: str, context: Any) -> None:
        failures = self._open_failures
        key = (request_type, name, SERVICE)
        failures[key] = failures.get(key, 0) + 1
        if context and INTENDED_CONTEXT_KEY in context:
            key = (request_type, name, INTENDED)
            failures[key] = failures.get(key, 0) + 1

    def _roll(self, second: int) -> None:
        """Close the recorded second (or the part of it recorded so far) and continue in ``second``."""
        if self._open or self._open_failures:
            histograms = {key: histogram_of(latencies) for key, latencies in self._open.items()}
            self._closed.append((self._open_second, histograms, self._open_failures))
            self._open, self._open_failures = {}, {}
        self._open_second = second

    # -- distribution --

    def export_report(self) -> dict[str, list]:
        """Everything recorded since the last export, encoded for the master; forgets it."""
        self._roll(self._open_second)
        closed, self._closed = self._closed, []
        intervals = []
        failures = []
        for second, histograms, failure_counts in closed:
            for key, histogram in histograms.items():
                intervals.append([second, *key, histogram.encode().decode("ascii")])
            for key, count in failure_counts.items():
                failures.append([second, *key, count])
        return {"intervals": intervals, "failures": failures, "first": self.first_request, "last": self.last_request}

    def merge_report(self, report: dict[str, list]) -> None:
        """Add a worker's ``export_report()`` to the run's histograms."""
        first, last = report.get("first"), report.get("last")
        if first is not None and self._stats_reset_at is not None:
            first = max(first, self._stats_reset_at)  # workers' first requests predate the master's "Reset stats"
        if first is not None and (self.first_request is None or first < self.first_request):
            self.first_request = first
        if last is not None and (self.last_request is None or last > self.last_request):
            self.last_request = last
        for second, request_type, name, series, payload in report.get("intervals", ()):
            self._add_interval(second, (request_type, name, series), HdrHistogram.decode(payload))
        for second, request_type, name, series, count in report.get("failures", ()):
            self._add_failures(second, (request_type, name, series), count)

    def _add_interval(self, second: int, key: Key, histogram: HdrHistogram) -> None:
        if not histogram.total_count:
            return  # hdrh's add() would take an empty histogram's minimum as 0
        cumulative = self._cumulative.get(key)
        if cumulative is None:
            cumulative = self._cumulative[key] = new_histogram()
        cumulative.add(histogram)
        per_second = self._pending.setdefault(second, {})
        if key in per_second:
            per_second[key].add(histogram)
        else:
            per_second[key] = histogram  # no longer recorded into: owned from here on
        if second <= self._last_sealed_second:
            logger.debug("latency of %s at %d arrived after that second was written; appended again", key, second)

    def _add_failures(self, second: int, key: Key, count: int) -> None:
        self._failures[key] = self._failures.get(key, 0) + count
        per_second = self._pending_failures.setdefault(second, {})
        per_second[key] = per_second.get(key, 0) + count

    def _collect(self) -> None:
        """Fold this process's recorded seconds into the run's histograms (not on workers: theirs go to the master)."""
        if self._is_worker():
            return
        self._receive_late_last_reports()
        self._roll(self._open_second)
        closed, self._closed = self._closed, []
        for second, histograms, failure_counts in closed:
            for key, histogram in histograms.items():
                self._add_interval(second, key, histogram)
            for key, count in failure_counts.items():
                self._add_failures(second, key, count)

    # -- reading --

    def snapshot(self) -> list[LatencyRow]:
        """One row per (type, name, series), sorted, then the ``Aggregated`` row of all service histograms."""
        self._collect()
        keys = sorted(self._cumulative.keys() | self._failures.keys())
        rows = [summary_row(key, self._cumulative.get(key), self._failures.get(key, 0)) for key in keys]
        aggregated = new_histogram()
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
        self._collect()
        return self._cumulative.get((request_type, name, series))

    # -- output --

    def flush(self, final: bool = False) -> None:
        """Write the seconds that are complete (all of them when ``final``) and rewrite the summary."""
        self._collect()
        if final:
            horizon = None
        elif isinstance(self._runner(), locust_runners.MasterRunner):
            horizon = int(_now() - locust_runners.WORKER_REPORT_INTERVAL - LATE_GRACE_SECONDS)
        else:
            horizon = int(_now())  # the current second may still grow
        sealed = self._seal(horizon)
        outputs = self._output_files()
        if outputs is not None:
            outputs.append(sealed)
            outputs.write_summary(self.snapshot(), self.first_request, self.last_request)

    def _seal(self, horizon: int | None) -> list[SealedInterval]:
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

    def _output_files(self) -> OutputFiles | None:
        if self._outputs is None:
            prefix = getattr(self._options(), "csv_prefix", None)
            if not prefix or self._is_worker():
                return None
            self._outputs = OutputFiles(prefix, self._started_at)
        return self._outputs

    def close(self) -> None:
        """Stop the periodic refresh and close the files (a later flush appends to them)."""
        if self._refresher is not None:
            self._refresher.kill(block=False)
            self._refresher = None
        if self._outputs is not None:
            self._outputs.close()

    def _refresh_forever(self) -> None:
        while True:
            gevent.sleep(REFRESH_SECONDS)
            try:
                self.flush()
            except Exception:
                logger.exception("could not refresh the latency files")

    # -- run life cycle --

    def reset(self) -> None:
        """Forget everything: a new run starts (on a worker, what is left is the previous run's tail)."""
        self._open, self._open_failures, self._closed = {}, {}, []
        self.reset_summary()
        self._stats_reset_at = None
        self._pending, self._pending_failures = {}, {}
        self._last_sealed_second = -1
        self._late_reports_received = False
        self._started_at = _now()
        if self._outputs is not None:
            self._outputs.close()
            self._outputs = None  # the next flush starts new files

    def reset_summary(self) -> None:
        """Forget the run's totals, keep its per-second history (Locust's "Reset stats")."""
        self._cumulative, self._failures = {}, {}
        self.first_request = self.last_request = None
        self._stats_reset_at = _now()

    def _on_test_start(self, **_kwargs: Any) -> None:
        if self._outputs is not None:
            self.flush(final=True)  # the previous run's last seconds, before its files are replaced
        self.reset()
        if not self._is_worker() and self._refresher is None:
            self._refresher = gevent.spawn(self._refresh_forever)

    def _on_test_stop(self, **_kwargs: Any) -> None:
        # A master's workers still have their last report to send (on "quit", or within 3 s of "stop").
        self.flush(final=not isinstance(self._runner(), locust_runners.MasterRunner))

    def _on_quitting(self, **_kwargs: Any) -> None:
        self.flush()

    def _on_quit(self, **_kwargs: Any) -> None:
        # After runner.quit(): the workers' last reports are in.
        self.flush(final=True)
        self.close()

    def _receive_late_last_reports(self) -> None:
        """On a master that quit, take the workers' last reports that came after Locust stopped listening.

        On quit Locust's master sends "quit" to the workers, listens 0.5 s for their last report, then kills its
        listener: a worker slower than that (a loaded machine) loses its last seconds, in Locust's stats as in these
        files. Once that listener is gone, listen on its socket until each worker has said "quit" (its last message).
        Any reader after runner.quit() (files, snapshot, SLA gates) gets the run's complete figures.
        """
        runner = self._runner()
        if self._late_reports_received or not isinstance(runner, locust_runners.MasterRunner) or len(runner.greenlet):
            return  # done, not a master, or its own listener still runs
        with self._late_reports_lock:
            if not self._late_reports_received:
                self._receive_until_workers_quit(runner)
                self._late_reports_received = True

    def _receive_until_workers_quit(self, runner: locust_runners.MasterRunner) -> None:
        waiting = {node.id for node in runner.clients.values() if node.state != locust_runners.STATE_MISSING}
        deadline = time.monotonic() + LAST_REPORTS_TIMEOUT_SECONDS
        while waiting:
            received = None
            with gevent.Timeout(max(0.0, deadline - time.monotonic()), False):
                try:
                    received = runner.server.recv_from_client()
                except RPCError as error:
                    logger.warning("could not receive the workers' last reports: %s", error)
            if received is None:
                break
            message = received[1]
            if message.type == "stats":
                self.environment.events.worker_report.fire(client_id=message.node_id, data=message.data)
            elif message.type == "quit":
                waiting.discard(message.node_id)
                runner.clients.pop(message.node_id, None)
        if waiting:
            logger.warning("%d worker(s) sent no last report: their last seconds are missing", len(waiting))

    def _on_report_to_master(self, data: dict[str, Any], **_kwargs: Any) -> None:
        data[REPORT_KEY] = self.export_report()

    def _on_worker_report(self, data: dict[str, Any], **_kwargs: Any) -> None:
        report = data.get(REPORT_KEY)
        if report:
            self.merge_report(report)

    def _on_reset_stats(self, **_kwargs: Any) -> None:
        if not self._is_worker():
            self._collect()
            self.reset_summary()

    def _on_spawning_complete(self, **_kwargs: Any) -> None:
        if self.environment.reset_stats:
            self._on_reset_stats()  # --reset-stats: Locust resets its stats once users are spawned

    def attach(self) -> None:
        """Listen to the environment's events (``recorder()`` does it once)."""
        events = self.environment.events
        events.request.add_listener(self.record)
        events.report_to_master.add_listener(self._on_report_to_master)
        events.worker_report.add_listener(self._on_worker_report)
        events.test_start.add_listener(self._on_test_start)
        events.test_stop.add_listener(self._on_test_stop)
        events.quitting.add_listener(self._on_quitting)
        events.quit.add_listener(self._on_quit)
        events.reset_stats.add_listener(self._on_reset_stats)
        events.spawning_complete.add_listener(self._on_spawning_complete)

    def _runner(self) -> locust_runners.Runner | None:
        return self.environment.runner

    def _options(self) -> Any:
        return self.environment.parsed_options

    def _is_worker(self) -> bool:
        return isinstance(self._runner(), locust_runners.WorkerRunner)


_RECORDER_ATTRIBUTE = "etcd_latency_recorder"


def recorder(environment: Environment) -> LatencyRecorder:
    """The recorder of ``environment``, created and attached to its events on first use."""
    found = getattr(environment, _RECORDER_ATTRIBUTE, None)
    if found is None:
        found = LatencyRecorder(environment)
        # kept on the environment itself: one per environment, gone with it
        setattr(environment, _RECORDER_ATTRIBUTE, found)
        found.attach()
    return found


@events.init.add_listener
def _on_init(environment: Environment, **_kwargs: Any) -> None:
    recorder(environment)
