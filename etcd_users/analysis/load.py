"""Find the files of one run by their CSV prefix and load them into a `Run`.

A run is what one ``locust --csv PREFIX`` wrote: Locust's own CSVs, and, when the etcd users recorded them, the
tool's exact latency files (HDR histograms in microseconds) and the load shape's timeline. Problems the user can
fix (a wrong prefix, an empty run, a CSV written by another tool) raise `AnalysisError` with a one-line message.
The files' suffixes and the columns read from them are the writers' own, from `etcd_users.files`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from etcd_users.files import AGGREGATED, REQUIRED_COLUMNS, SHAPE_REQUIRED_KEYS, SUFFIXES, TEXT_COLUMNS

# Locust stores an exception's repr when the user code passes an exception object, e.g.
# "EtcdError('etcdserver: too many requests')" or "CatchResponseError('UNAVAILABLE')": report the label inside.
_WRAPPED_ERROR = re.compile(r"""^[A-Za-z_][\w.]*\((?P<quote>['"])(?P<label>.*)(?P=quote),?\)$""", re.DOTALL)


class AnalysisError(Exception):
    """An input problem the user can fix; the CLI prints it as one line and exits with status 2."""


@dataclass
class Run:
    """Everything one run wrote, as loaded from disk. Absent files are None."""

    label: str
    prefix: str
    stats: pd.DataFrame | None = None
    history: pd.DataFrame | None = None
    failures: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(REQUIRED_COLUMNS["failures"])))
    exceptions: pd.DataFrame | None = None
    latency: pd.DataFrame | None = None
    latency_history: pd.DataFrame | None = None
    hlog_path: Path | None = None
    shape: dict | None = None
    etcd_metrics: pd.DataFrame | None = None  # the members' /metrics polled during the run
    client_cpu: pd.DataFrame | None = None  # each Locust process's CPU per second

    def path(self, kind: str) -> Path:
        return Path(self.prefix + SUFFIXES[kind])


def normalize_prefix(prefix: str) -> str:
    """Accept the prefix itself or the path of one of its files (``out/run_stats.csv`` -> ``out/run``)."""
    for suffix in sorted(SUFFIXES.values(), key=len, reverse=True):
        if prefix.endswith(suffix):
            return prefix[: -len(suffix)]
    return prefix


def error_label(error: str) -> str:
    """The etcd or gRPC label of a failure as Locust stored it, without a Python exception's repr around it."""
    match = _WRAPPED_ERROR.match(error.strip())
    return match.group("label") if match else error.strip()


def load_run(prefix: str, label: str | None = None) -> Run:
    """Load the run written with ``--csv PREFIX``; raise `AnalysisError` when it is missing, empty or foreign."""
    prefix = normalize_prefix(prefix)
    run = Run(label=label or Path(prefix).name or prefix, prefix=prefix)
    if not run.path("stats").is_file() and not run.path("latency").is_file() and not run.path("hlog").is_file():
        looked_for = ", ".join(str(run.path(kind)) for kind in ("stats", "latency", "hlog"))
        raise AnalysisError(f"no run found at prefix {prefix!r}: looked for {looked_for}")

    run.stats = _read_csv(run, "stats")
    run.history = _read_csv(run, "history")
    failures = _read_csv(run, "failures")
    if failures is not None:
        failures["Error"] = failures["Error"].map(error_label)
        run.failures = failures
    run.exceptions = _read_csv(run, "exceptions")
    run.latency = _read_csv(run, "latency")
    run.latency_history = _read_csv(run, "latency_history")
    if run.path("hlog").is_file() and run.path("hlog").stat().st_size > 0:
        run.hlog_path = run.path("hlog")
    run.shape = _read_shape(run)
    run.etcd_metrics = read_etcd_metrics(run.path("etcd_metrics"))
    run.client_cpu = _read_csv(run, "client_cpu")

    if total_requests(run) == 0:
        source = run.path("latency") if run.latency is not None else run.path("stats")
        raise AnalysisError(f"run {prefix!r} recorded no requests ({source} has no request with a count above 0)")
    return run


def total_requests(run: Run) -> int:
    """Requests of the whole run, from the exact latency file when present, else from Locust's stats."""
    if run.latency is not None:
        rows = run.latency[run.latency["Name"] != AGGREGATED]
        return int(rows.groupby("Series")["Count"].sum().max()) if len(rows) else 0
    if run.stats is not None:
        rows = run.stats[run.stats["Name"] != AGGREGATED]
        return int(rows["Request Count"].sum())
    return 0


def _read_csv(run: Run, kind: str) -> pd.DataFrame | None:
    path = run.path(kind)
    if not path.is_file():
        return None
    return _read_csv_file(path, kind)


def _read_csv_file(path: Path, kind: str) -> pd.DataFrame:
    if path.stat().st_size == 0:
        raise AnalysisError(f"{path} is empty (was the run interrupted before Locust wrote it?)")
    try:
        # Keep names as written: a request named "NA" must not become a missing value.
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise AnalysisError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [column for column in REQUIRED_COLUMNS[kind] if column not in frame.columns]
    if missing:
        raise AnalysisError(f"{path} was not written by {_writer(kind)}: missing columns {', '.join(missing)}")
    for column in frame.columns:
        if column not in TEXT_COLUMNS:
            # Locust writes "N/A" for percentiles of an entry without requests.
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def read_etcd_metrics(path: Path) -> pd.DataFrame | None:
    """``PREFIX_etcd_metrics.csv`` with numbers as floats (empty cells NaN), ``Error`` "" on answered rows; None
    when the run has no such file."""
    if not path.is_file():
        return None
    frame = _read_csv_file(path, "etcd_metrics")
    frame = frame[frame["Timestamp"].notna() & (frame["Member"] != "")]
    # A member's rows in time order; the members of one poll keep the order they were written in.
    return frame.sort_values("Timestamp", kind="stable").reset_index(drop=True)


def _writer(kind: str) -> str:
    if kind == "etcd_metrics":
        return "this tool's server metrics poller (--etcd-metrics-interval)"
    if kind == "client_cpu":
        return "this tool's client CPU sampler"
    return "this tool's etcd users" if kind.startswith("latency") else "Locust (--csv)"


def optional_json(path: Path) -> object | None:
    """A JSON file a run may have written (the shape's record, the disruptions, the audit, the summary): None when it
    is absent, AnalysisError in one line when it cannot be read."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise AnalysisError(f"{path} is not readable JSON: {exc}") from None


def _read_shape(run: Run) -> dict | None:
    path = run.path("shape")
    shape = optional_json(path)
    if shape is None:
        return None
    if not isinstance(shape, dict) or any(key not in shape for key in SHAPE_REQUIRED_KEYS):
        keys = " and ".join(SHAPE_REQUIRED_KEYS)
        raise AnalysisError(f"{path} was not written by this tool's load shapes: no {keys}")
    return shape
