"""The text report of etcd's ``benchmark`` tool (tools/benchmark, pkg/report), rebuilt from a run's data.

The layout is the Go tool's, byte for byte: seconds with ``%4.4f``, tabs where it prints tabs, an 11-row
histogram of ``∎`` bars scaled to 40 for the fullest bucket, the latency distribution at 10/25/50/75/90/95/99/99.9 %
(a line is left out when the source cannot tell, as the Go tool leaves out zeros), then the error distribution.

As in the Go tool, Requests/sec counts successful requests only; Total is the run's measured duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from etcd_users.analysis.distribution import HdrDistribution, LatencyDistribution
from etcd_users.analysis.load import AnalysisError, Run
from etcd_users.analysis.measure import Measurement, RunMeasurement, Warmup, measure_run, request_names
from etcd_users.files import AGGREGATED, SERVICE

BAR = "∎"
BUCKETS = 10
BAR_WIDTH = 40
PERCENTILES = (10, 25, 50, 75, 90, 95, 99, 99.9)
PRECISION = "%4.4f"


@dataclass
class BenchmarkFigures:
    """What the Go tool's report shows, in seconds."""

    total_s: float
    requests_per_s: float
    distribution: LatencyDistribution | None
    errors: list[tuple[str, int]]


def _secs(value_s: float) -> str:
    return (PRECISION % value_s) + " secs"


def format_report(figures: BenchmarkFigures) -> str:
    """The report text exactly as etcd's benchmark prints it (starting with its blank line)."""
    text = ""
    distribution = figures.distribution
    if distribution is not None and distribution.count > 0:
        text += "\nSummary:\n"
        text += f"  Total:\t{_secs(figures.total_s)}.\n"
        text += f"  Slowest:\t{_secs(distribution.max_ms / 1000)}.\n"
        text += f"  Fastest:\t{_secs(distribution.min_ms / 1000)}.\n"
        text += f"  Average:\t{_secs(distribution.mean_ms / 1000)}.\n"
        text += f"  Stddev:\t{_secs(distribution.stddev_ms / 1000)}.\n"
        text += f"  Requests/sec:\t{PRECISION % figures.requests_per_s}\n"
        text += _histogram(distribution)
        text += _latencies(distribution)
    if figures.errors:
        text += "\nError distribution:\n"
        for label, count in figures.errors:
            text += f"  [{count}]\t{label}\n"
    return text


def _histogram(distribution: LatencyDistribution) -> str:
    fastest, slowest = distribution.min_ms, distribution.max_ms
    step = (slowest - fastest) / BUCKETS
    edges = [fastest + step * i for i in range(BUCKETS)] + [slowest]
    counts = distribution.bucket_counts(edges)
    fullest = max(counts)
    text = "\nResponse time histogram:\n"
    for edge, count in zip(edges, counts, strict=True):
        bar = BAR * (count * BAR_WIDTH // fullest if fullest > 0 else 0)
        text += f"  {PRECISION % (edge / 1000)} [{count}]\t|{bar}\n"
    return text


def _latencies(distribution: LatencyDistribution) -> str:
    text = "\nLatency distribution:\n"
    for percent in PERCENTILES:
        value_ms = distribution.percentile(percent)
        if value_ms:
            text += f"  {percent:g}% in {_secs(value_ms / 1000)}.\n"
    return text


def figures_for(run_measurement: RunMeasurement, measurement: Measurement) -> BenchmarkFigures:
    """The Go report's figures for one measured name of a run."""
    window = run_measurement.window
    ok = measurement.requests - measurement.failures
    if window is not None and window.duration_s > 0:
        total_s = window.duration_s
    elif measurement.qps:
        total_s = measurement.requests / measurement.qps
    else:
        total_s = 0.0
    return BenchmarkFigures(
        total_s=total_s,
        requests_per_s=ok / total_s if total_s else 0.0,
        distribution=measurement.distribution,
        errors=error_distribution(run_measurement.run, measurement.name),
    )


def error_distribution(run: Run, name: str) -> list[tuple[str, int]]:
    """Failures of one name (all names for ``Aggregated``) by label, most frequent first."""
    failures = run.failures
    if name != AGGREGATED:
        failures = failures[failures["Name"] == name]
    counts = failures.groupby("Error", sort=False)["Occurrences"].sum().sort_values(ascending=False, kind="stable")
    return [(str(label), int(count)) for label, count in counts.items() if count > 0]


def source_line(run_measurement: RunMeasurement, measurement: Measurement) -> str:
    """One line saying where the figures below come from."""
    run = run_measurement.run
    head = f"{run.label} {measurement.name}:"
    line = run_measurement.timeline
    qps_from = f"QPS from {run.path('latency_history' if line and line.source == 'exact' else 'history').name}"
    if line is None:
        qps_from = "QPS from Locust's Requests/s"
    if isinstance(measurement.distribution, HdrDistribution):
        return f"{head} exact, from {run.path('hlog').name}; {qps_from}"
    if measurement.source == "exact":
        return f"{head} exact percentiles from {run.path('latency').name}, histogram and stddev estimated; {qps_from}"
    return (
        f"{head} from Locust's CSV ({run.path('stats').name}): whole-millisecond percentiles, "
        f"histogram and stddev estimated from them; {qps_from}"
    )


def summary(run: Run, name: str | None = None, warmup: Warmup = None, series: str = SERVICE) -> str:
    """Reports for ``name`` (default: each request name in turn), each after a line naming its source."""
    measured = measure_run(run, [name] if name else None, warmup, series, need_histograms=True)
    chosen = [m for m in measured.measurements if name or m.name != AGGREGATED]
    if not chosen:
        names = ", ".join(request_names(run, series)) or "none"
        raise AnalysisError(f"{run.label}: no requests named {name!r} (its names: {names})")
    blocks = [source_line(measured, m) + "\n" + format_report(figures_for(measured, m)) for m in chosen]
    return "\n".join(blocks + measured.notes)
