"""The comparison table (runs x request names) and the error-distribution table, as pandas DataFrames.

Values stay unrounded here; the writers in `analysis.report` format them.
"""

from __future__ import annotations

import pandas as pd

from etcd_users.analysis.load import Run, total_requests
from etcd_users.analysis.measure import Measurement, RunMeasurement
from etcd_users.files import AGGREGATED

LATENCY_COLUMNS = {
    "avg (ms)": None,  # the mean, not a percentile
    "P50 (ms)": 50.0,
    "P90 (ms)": 90.0,
    "P99 (ms)": 99.0,
    "P99.9 (ms)": 99.9,
    "max (ms)": 100.0,
}
COMPARISON_COLUMNS = ["run", "name", "requests", "QPS", *LATENCY_COLUMNS, "failures", "error %", "source"]
# Like the single node vs 3-node benchmark chapter: "3-node write QPS is 37.6 % of single node, latency x2.7".
RATIO_COLUMNS = {
    "QPS % of baseline": "QPS",
    "P99 ×": "P99 (ms)",
    "P99.9 ×": "P99.9 (ms)",
    "avg ×": "avg (ms)",
}
ERROR_COLUMNS = ["run", "error", "occurrences", "% of failures", "% of requests", "names"]


def comparison_table(runs: list[RunMeasurement], baseline: str | None = None) -> pd.DataFrame:
    """One row per run and request name; with ``baseline`` (a run label), ratios to that run's same name."""
    rows = [_comparison_row(m) for run in runs for m in run.measurements]
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    for column in ("requests", "failures"):
        table[column] = table[column].astype("int64")
    if baseline is not None:
        table = _add_ratios(table, baseline)
    return table


def _comparison_row(measurement: Measurement) -> dict:
    distribution = measurement.distribution
    row = {
        "run": measurement.run,
        "name": measurement.name,
        "requests": measurement.requests,
        "QPS": measurement.qps,
        "failures": measurement.failures,
        "error %": measurement.error_pct,
        "source": measurement.source,
    }
    for column, percent in LATENCY_COLUMNS.items():
        if distribution is None:
            row[column] = None
        elif percent is None:
            row[column] = distribution.mean_ms
        elif percent == 100.0:
            row[column] = distribution.max_ms
        else:
            row[column] = distribution.percentile(percent)
    return row


def _add_ratios(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    reference = table[table["run"] == baseline].set_index("name")
    for ratio, column in RATIO_COLUMNS.items():
        base = table["name"].map(reference[column]).astype(float)
        value = table[column].astype(float)
        ratios = value / base.where(base > 0)
        table[ratio] = ratios * 100.0 if ratio.startswith("QPS") else ratios
    return table


def errors_table(runs: list[Run]) -> pd.DataFrame:
    """Failures by error label per run (whole run: Locust's failures CSV is not split in time)."""
    rows = []
    for run in runs:
        failures = run.failures
        if failures.empty:
            continue
        requests = total_requests(run)
        total_failures = int(failures["Occurrences"].sum())
        grouped = failures.groupby("Error", sort=False).agg(
            occurrences=("Occurrences", "sum"), names=("Name", lambda names: ", ".join(dict.fromkeys(names)))
        )
        for label, group in grouped.sort_values("occurrences", ascending=False, kind="stable").iterrows():
            occurrences = int(group["occurrences"])
            rows.append(
                {
                    "run": run.label,
                    "error": label,
                    "occurrences": occurrences,
                    "% of failures": 100.0 * occurrences / total_failures if total_failures else None,
                    "% of requests": 100.0 * occurrences / requests if requests else None,
                    "names": group["names"],
                }
            )
    table = pd.DataFrame(rows, columns=ERROR_COLUMNS)
    table["occurrences"] = table["occurrences"].astype("int64")
    return table


def chart_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows worth a bar each: request names, and the aggregate only for runs that have nothing else."""
    names = table[table["name"] != AGGREGATED]
    return names if len(names) else table
