"""The figures of each request name of a run over its measured window: requests, QPS, latency distribution.

Sources, best first (the ``source`` of a measurement says which one gave its latencies):

- latencies: the tool's HDR log merged over the window (exact, and the only way to cut a warm-up exactly), then
  the tool's latency CSV (exact, whole run), then Locust's stats CSV (whole milliseconds, whole run);
- requests and failures: the history rows in the window when a warm-up is cut, else the latency CSV, else
  Locust's stats CSV;
- duration: the history (see `analysis.timeseries`), the same for every name of a run so that the names' QPS add
  up to the run's; counts that could not be cut (Locust's history without rows per name) keep the whole run's
  duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
from hdrh.histogram import HdrHistogram

from etcd_users.analysis.distribution import HdrDistribution, LatencyDistribution, PercentileDistribution
from etcd_users.analysis.hlog import merge_intervals
from etcd_users.analysis.load import AnalysisError, Run
from etcd_users.analysis.timeseries import Timeline, Window, after_cut, measured_window, timeline
from etcd_users.files import (
    AGGREGATED,
    LATENCY_SUMMARY_PERCENTILES,
    LOCUST_PERCENTILE_COLUMNS,
    SERVICE,
    HlogKey,
    tag_text,
)
from etcd_users.hdr import merge

Warmup = float | Literal["auto"] | None

EXACT = "exact"
LOCUST = "locust"

# The percentile columns of the latency CSV: P50 ... P99.99.
_LATENCY_PERCENTILES = {percent: f"P{percent:g}" for percent in LATENCY_SUMMARY_PERCENTILES}


@dataclass
class Measurement:
    """One request name (or ``Aggregated``) of one run over the measured window."""

    run: str
    name: str
    requests: int
    failures: int
    qps: float | None
    distribution: LatencyDistribution | None
    source: str

    @property
    def error_pct(self) -> float | None:
        return 100.0 * self.failures / self.requests if self.requests else None


@dataclass
class RunMeasurement:
    """All measurements of a run, with the window they cover and what the reader should know about them."""

    run: Run
    measurements: list[Measurement]
    window: Window | None
    cut_s: float | None
    timeline: Timeline | None
    window_note: str
    notes: list[str] = field(default_factory=list)


def request_names(run: Run, series: str = SERVICE) -> list[str]:
    """The run's request names in the order they were written, without ``Aggregated``."""
    if run.latency is not None:
        rows = run.latency[(run.latency["Series"] == series) & (run.latency["Name"] != AGGREGATED)]
        if len(rows):
            return list(dict.fromkeys(rows["Name"]))
    if run.stats is not None:
        return list(dict.fromkeys(run.stats.loc[run.stats["Name"] != AGGREGATED, "Name"]))
    return []


def resolve_cut(run: Run, started_at: float | None, warmup: Warmup, notes: list[str]) -> float | None:
    """The unix time the measured window starts at, or None to keep the whole run.

    A number of seconds counts from ``started_at`` (see `run_start`); ``"auto"`` uses the end of the warm-up
    the shape recorded.
    """
    if warmup is None:
        return None
    if warmup == "auto":
        warmup_end = (run.shape or {}).get("warmup_end")
        if warmup_end is None:
            why = f"no {run.path('shape').name}" if run.shape is None else "its load shape recorded no warmup_end"
            notes.append(f"{run.label}: no warm-up cut ({why}); whole run used.")
            return None
        return float(warmup_end)
    if started_at is None:
        notes.append(f"{run.label}: no warm-up cut (no history to tell when the run started); whole run used.")
        return None
    return started_at + float(warmup)


def measure_run(
    run: Run,
    names: list[str] | None = None,
    warmup: Warmup = None,
    series: str = SERVICE,
    need_histograms: bool = False,
) -> RunMeasurement:
    """Measure each requested name of ``run`` (all names, plus ``Aggregated`` when there are several).

    ``need_histograms`` reads the HDR log even when the latency CSV would do (for the histogram and stddev).
    """
    notes: list[str] = []
    line = timeline(run, series)
    cut_s = resolve_cut(run, run_start(run, line), warmup, notes)
    if run.latency is not None and series not in set(run.latency["Series"]):
        notes.append(f"{run.label}: no {series!r} series in {run.path('latency').name}; Locust's figures shown.")
    available = request_names(run, series)
    if names:
        for name in names:
            if name != AGGREGATED and name not in available:
                notes.append(f"{run.label}: no requests named {name!r}.")
        wanted = [name for name in names if name in available or name == AGGREGATED]
    else:
        wanted = available + ([AGGREGATED] if len(available) > 1 else [])

    window = _exact_window(run, measured_window(after_cut(line.totals(), cut_s)) if line else None, cut_s)
    histograms = _histograms(run, cut_s, need_histograms, series)
    if cut_s is not None and histograms is None:
        notes.append(
            f"{run.label}: avg, percentiles and max include the warm-up "
            f"(no {run.path('hlog').name} to cut them exactly)."
        )
    if line is not None and cut_s is not None and not line.per_name and any(n != AGGREGATED for n in wanted):
        notes.append(
            f"{run.label}: requests and QPS per name cover the whole run, warm-up included "
            "(Locust's history has rows per name only with --csv-full-history)."
        )
    if window is not None:
        cut_text = f", warm-up cut at +{cut_s - run_start(run, line):g} s" if cut_s is not None else ""
        window_note = (
            f"{run.label}: QPS = requests / {window.duration_s:g} s measured from the "
            f"{line.source} history (unix {window.start:.0f}-{window.end:.0f}{cut_text})."
        )
    else:
        window_note = f"{run.label}: no history rows with requests; QPS is Locust's own Requests/s over the whole run."
    if run.exceptions is not None and len(run.exceptions):
        count = int(run.exceptions["Count"].fillna(0).sum())
        notes.append(f"{run.label}: {count} exception(s) in user code, see {run.path('exceptions').name}.")

    whole_run = _exact_window(run, measured_window(line.totals()) if line else None, None)
    measurements = [_measure_name(run, name, series, line, cut_s, window, whole_run, histograms) for name in wanted]
    return RunMeasurement(run, measurements, window, cut_s, line, window_note, notes)


def run_start(run: Run, line: Timeline | None) -> float | None:
    """When the run started: the load shape's ``started_at``, else the first row of its history."""
    started_at = (run.shape or {}).get("started_at")
    if started_at is not None:
        return float(started_at)
    return line.started_at if line else None


def _histograms(run: Run, cut_s: float | None, needed: bool, series: str) -> dict[HlogKey, HdrHistogram] | None:
    """The HDR log merged over the window; only read when it is needed (a cut, or no latency CSV)."""
    if run.hlog_path is None:
        return None
    # The latency CSV's Aggregated row covers the service series only.
    if cut_s is None and run.latency is not None and not needed and series == SERVICE:
        return None
    return merge_intervals(run.hlog_path, cut_s)


def _measure_name(
    run: Run,
    name: str,
    series: str,
    line: Timeline | None,
    cut_s: float | None,
    window: Window | None,
    whole_run: Window | None,
    histograms: dict[HlogKey, HdrHistogram] | None,
) -> Measurement:
    distribution, source = _distribution(run, name, series, histograms)
    counted_after_cut = cut_s is not None and line is not None and (line.per_name or name == AGGREGATED)
    if counted_after_cut:
        rows = after_cut(line.rows_for(name), cut_s)
        requests, failures = int(rows["requests"].sum()), int(rows["failures"].sum())
    else:
        requests, failures = _whole_run_counts(run, name, series, line)
        # Counts that could not be cut go with the duration of the whole run, or QPS would be inflated.
        window = whole_run
    if window is not None and window.duration_s > 0:
        qps = requests / window.duration_s
    else:
        qps = _locust_value(run, name, "Requests/s")
    return Measurement(run.label, name, requests, failures, qps, distribution, source)


def _distribution(
    run: Run, name: str, series: str, histograms: dict[HlogKey, HdrHistogram] | None
) -> tuple[LatencyDistribution | None, str]:
    if histograms is not None:
        keys = [key for key in histograms if key.series == series and key.name != AGGREGATED]
        histogram = merge([histograms[key] for key in keys if name == AGGREGATED or key.name == tag_text(name)])
        if histogram is not None and histogram.get_total_count():
            return HdrDistribution(histogram), EXACT
    row = _latency_row(run, name, series)
    if row is not None:
        if pd.isna(row["Mean"]):
            return None, EXACT  # every request of that name failed: failures have no latency
        known = {percent: row[column] for percent, column in _LATENCY_PERCENTILES.items()}
        successes = row["Count"] - row["Failures"]
        return PercentileDistribution(successes, row["Min"], row["Mean"], row["Max"], known), EXACT
    row = _stats_row(run, name)
    if row is not None:
        known = {float(column.rstrip("%")): row[column] for column in LOCUST_PERCENTILE_COLUMNS if column in row}
        distribution = PercentileDistribution(
            row["Request Count"],
            row["Min Response Time"],
            row["Average Response Time"],
            row["Max Response Time"],
            known,
        )
        return distribution, LOCUST
    return None, LOCUST


def _whole_run_counts(run: Run, name: str, series: str, line: Timeline | None) -> tuple[int, int]:
    row = _latency_row(run, name, series)
    if row is not None:
        return int(row["Count"]), int(row["Failures"])
    row = _stats_row(run, name)
    if row is not None:
        return int(row["Request Count"]), int(row["Failure Count"])
    if line is not None:
        rows = line.rows_for(name)
        return int(rows["requests"].sum()), int(rows["failures"].sum())
    raise AnalysisError(f"{run.label}: no counts for {name!r}")


def _latency_row(run: Run, name: str, series: str) -> pd.Series | None:
    if run.latency is None:
        return None
    rows = run.latency[(run.latency["Name"] == name) & (run.latency["Series"] == series)]
    return rows.iloc[-1] if len(rows) else None


def _stats_row(run: Run, name: str) -> pd.Series | None:
    if run.stats is None:
        return None
    rows = run.stats[run.stats["Name"] == name]
    return rows.iloc[-1] if len(rows) else None


def _locust_value(run: Run, name: str, column: str) -> float | None:
    row = _stats_row(run, name)
    if row is None or pd.isna(row[column]):
        return None
    value = float(row[column])
    return None if math.isnan(value) else value


def _exact_window(run: Run, window: Window | None, cut_s: float | None) -> Window | None:
    """The window with the run's exact first and last request times (``_latency.csv``), when it has them.

    History rows are whole seconds, and a run starts and ends inside its first and last ones: a 5 s run spread
    over 7 rows must not read as 7 s.
    """
    if window is None or run.latency is None or not {"First", "Last"} <= set(run.latency.columns):
        return window
    first, last = run.latency["First"].min(), run.latency["Last"].max()
    if pd.isna(first) or pd.isna(last) or last <= first:
        return window
    start = float(first) if cut_s is None else max(window.start, float(first))
    return Window(start, min(window.end, float(last)))
