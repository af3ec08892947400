"""A YCSB suite's table in YCSB's terms: per workload, the throughput of all operations ([OVERALL] in YCSB's output)
and per operation (READ, UPDATE, INSERT, SCAN, READ-MODIFY-WRITE) its count, operations per second and average,
95th and 99th percentile latency in microseconds.

Made from the same suite directory as the suite's table (a suite with an axis ``ycsb``, as ``suites/ycsb.yaml``),
each completed run measured as the comparison table measures it; with several repeats, the figures are the means
over them and the operations their sum.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from etcd_users.analysis.load import AnalysisError, load_run
from etcd_users.analysis.measure import Warmup, measure_run
from etcd_users.analysis.report import markdown_table
from etcd_users.analysis.suite import read_suite
from etcd_users.files import AGGREGATED, RUN_DONE
from etcd_users.workload_model.ycsb import REQUEST_PREFIX, WORKLOADS

AXIS = "ycsb"
OVERALL = "OVERALL"
COLUMNS = ["workload", "operation", "operations", "ops/s", "avg (µs)", "P95 (µs)", "P99 (µs)", "errors"]
DECIMALS = {"ops/s": 1, "avg (µs)": 0, "P95 (µs)": 0, "P99 (µs)": 0}
# YCSB's own names of the operations in its output
YCSB_NAMES = {"read": "READ", "update": "UPDATE", "insert": "INSERT", "scan": "SCAN", "rmw": "READ-MODIFY-WRITE"}


def is_ycsb_suite(axis_names: list[str]) -> bool:
    return AXIS in axis_names


def ycsb_table(directory: Path, warmup: Warmup = None, series: str = "service") -> pd.DataFrame:
    """One row per workload and operation (the workload's OVERALL first), workloads in the suite's order."""
    directory, document = read_suite(directory)
    rows = []
    for combination in document["combinations"]:
        workload = str(combination["values"].get(AXIS) or "").upper()
        per_run = []
        for entry in combination["runs"]:
            if entry["status"] != RUN_DONE:
                continue
            try:
                measured = measure_run(
                    load_run(str(directory / entry["prefix"]), entry["prefix"]), None, warmup, series
                )
            except AnalysisError:
                continue  # the suite's table names the runs it could not read
            per_run.append(measured.measurements)
        if per_run:
            rows.extend(_workload_rows(workload, per_run))
    if not rows:
        raise AnalysisError(f"no completed YCSB run in {directory}")
    return pd.DataFrame(rows, columns=COLUMNS)


def _workload_rows(workload: str, per_run: list[list]) -> list[dict]:
    operations: dict[str, list] = {}
    overall = []
    for measurements in per_run:
        named = [m for m in measurements if m.name.startswith(REQUEST_PREFIX)]
        for measurement in named:
            operations.setdefault(measurement.name, []).append(measurement)
        aggregated = [m for m in measurements if m.name == AGGREGATED] or named  # one operation: no Aggregated row
        overall.extend(aggregated[:1])
    title = WORKLOADS[workload].title if workload in WORKLOADS else ""
    label = f"{workload} ({title})" if title else workload
    rows = [_row(label, OVERALL, overall, latencies=False)]
    order = {f"{REQUEST_PREFIX}{name}": index for index, name in enumerate(YCSB_NAMES)}
    for name in sorted(operations, key=lambda name: order.get(name, len(order))):
        operation = YCSB_NAMES.get(name.removeprefix(REQUEST_PREFIX), name)
        rows.append(_row(label, operation, operations[name], latencies=True))
    return rows


def _row(workload: str, operation: str, measurements: list, *, latencies: bool) -> dict:
    def mean(values) -> float | None:
        values = [value for value in values if value is not None]
        return sum(values) / len(values) if values else None

    def percentile(percent: float):
        return (m.distribution.percentile(percent) if m.distribution else None for m in measurements)

    row = {
        "workload": workload,
        "operation": operation,
        "operations": sum(m.requests for m in measurements),
        "ops/s": mean(m.qps for m in measurements),
        "errors": sum(m.failures for m in measurements),
    }
    milliseconds = {
        "avg (µs)": mean(m.distribution.mean_ms if m.distribution else None for m in measurements),
        "P95 (µs)": mean(percentile(95.0)),
        "P99 (µs)": mean(percentile(99.0)),
    }
    for column, value in milliseconds.items():
        row[column] = value * 1000.0 if latencies and value is not None else None
    return row


def markdown(table: pd.DataFrame) -> str:
    return markdown_table(table, DECIMALS)
