"""The exact latency files of a run (columns in ``etcd_users.files``), written by the master or the single process:

- ``PREFIX_latency.csv``: one row per (type, name, series) over the run, plus an ``Aggregated`` row, replaced whole;
- ``PREFIX_latency_history.csv``: one row per second per key, appended;
- ``PREFIX_latency.hlog``: the per-second histograms as an HdrHistogram interval log, for standard HDR tools.
"""

from __future__ import annotations

import csv
import os
from datetime import datetime
from typing import TextIO

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from etcd_users import hdr
from etcd_users.files import (
    LATENCY_HISTORY_COLUMNS,
    LATENCY_HISTORY_PERCENTILES,
    LATENCY_SUMMARY_COLUMNS,
    SUFFIXES,
    HlogKey,
)
from etcd_users.latency.store import LatencyRow, SealedInterval


def format_ms(value_ms: float | None) -> str:
    """Milliseconds with 3 decimals (microsecond precision); empty when there is no value."""
    return "" if value_ms is None else f"{value_ms:.3f}"


def summary_fields(row: LatencyRow, first: float | None = None, last: float | None = None) -> list[str | int]:
    """The ``_latency.csv`` fields of a row, in LATENCY_SUMMARY_COLUMNS order."""
    window = ["" if moment is None else f"{moment:.3f}" for moment in (first, last)]
    return [row.type, row.name, row.series, row.count, row.failures, *map(format_ms, row[5:]), *window]


def history_fields(interval: SealedInterval) -> list[str | int | float]:
    """The ``_latency_history.csv`` fields of one second of one key, in LATENCY_HISTORY_COLUMNS order."""
    histogram = interval.histogram
    successes = histogram.total_count if histogram is not None else 0
    requests = successes + interval.failures
    if successes:
        latencies = [*hdr.percentiles_us(histogram, LATENCY_HISTORY_PERCENTILES), histogram.get_max_value()]
        latency_fields = [format_ms(value / 1000.0) for value in latencies]
    else:
        latency_fields = [""] * (len(LATENCY_HISTORY_PERCENTILES) + 1)
    return [interval.second, *interval.key, requests, interval.failures, float(requests), *latency_fields]


def write_summary_csv(out: TextIO, rows: list[LatencyRow], first: float | None, last: float | None) -> None:
    """``_latency.csv`` (also the web UI's download)."""
    writer = csv.writer(out)
    writer.writerow(LATENCY_SUMMARY_COLUMNS)
    writer.writerows(summary_fields(row, first, last) for row in rows)


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


class LatencyFiles:
    """The three files of one run: the summary is rewritten whole, history and hlog are appended second by second."""

    def __init__(self, prefix: str, started_at: float) -> None:
        self.summary_path = prefix + SUFFIXES["latency"]
        self.history_path = prefix + SUFFIXES["latency_history"]
        self.hlog_path = prefix + SUFFIXES["hlog"]
        self._base_second = int(started_at)
        self._history: TextIO | None = open(self.history_path, "w", newline="")
        self._hlog: TextIO | None = open(self.hlog_path, "w")
        csv.writer(self._history).writerow(LATENCY_HISTORY_COLUMNS)
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
                hlog.output_tagged_interval(HlogKey(*interval.key).tag, interval.histogram, start, 1.0, 1000.0)
        self._flush()

    def write_summary(self, rows: list[LatencyRow], first: float | None = None, last: float | None = None) -> None:
        # Replaced whole and atomically: a reader never sees half a file.
        partial = self.summary_path + ".partial"
        with open(partial, "w", newline="") as summary:
            write_summary_csv(summary, rows, first, last)
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
