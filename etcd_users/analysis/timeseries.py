"""A run's requests over time, one row per interval, and the measured window those rows define.

Two sources, the first present wins:

- the tool's ``PREFIX_latency_history.csv``: one row per unix second [T, T+1) per request name, with exact
  per-second percentiles;
- Locust's ``PREFIX_stats_history.csv``: one row every CSV interval (1 s by default) holding *cumulative* counts,
  so the requests of the interval (T_prev, T] are the difference of ``Total Request Count``. Its ``Requests/s`` is a
  lagging window and is not used. Its percentiles cover the last 10 s with ``--csv-full-history`` (which also adds
  rows per name) and the whole run so far without it.

The measured duration of a run is the time from the start of the first interval with requests to the end of the
last one, warm-up excluded; QPS is requests divided by that duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from etcd_users.analysis.load import Run
from etcd_users.files import AGGREGATED, SERVICE

COLUMNS = ["name", "start", "end", "requests", "failures", "p50", "p99", "p999", "max"]


@dataclass(frozen=True)
class Window:
    """The measured part of a run, in unix seconds."""

    start: float
    end: float

    @property
    def duration_s(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    """Per-interval requests, failures and latency percentiles (ms) of one run."""

    frame: pd.DataFrame
    source: str  # "exact" or "locust"
    percentiles_kind: str  # what the p50/p99/p999 columns describe
    per_name: bool  # False when Locust wrote only the Aggregated rows (no --csv-full-history)
    started_at: float  # the first timestamp of the history

    def rows_for(self, name: str) -> pd.DataFrame:
        """The rows of one request name, or the per-interval totals for ``Aggregated``."""
        if name == AGGREGATED:
            return self.totals()
        return self.frame[self.frame["name"] == name]

    def totals(self) -> pd.DataFrame:
        """Requests and failures of all names together, per interval."""
        if not self.per_name:
            return self.frame[self.frame["name"] == AGGREGATED]
        names = self.frame[self.frame["name"] != AGGREGATED]
        summed = names.groupby(["start", "end"], as_index=False)[["requests", "failures"]].sum()
        summed.insert(0, "name", AGGREGATED)
        return summed


def timeline(run: Run, series: str = SERVICE) -> Timeline | None:
    """The run's timeline from the exact history when it has rows for ``series``, else from Locust's history."""
    if run.latency_history is not None:
        rows = run.latency_history[run.latency_history["Series"] == series]
        if len(rows):
            return _exact_timeline(rows)
    if run.history is not None and len(run.history):
        return _locust_timeline(run.history)
    return None


def after_cut(rows: pd.DataFrame, cut_s: float | None) -> pd.DataFrame:
    """The rows in the measured window: at least half of their interval lies after the cut."""
    if cut_s is None:
        return rows
    return rows[(rows["start"] + rows["end"]) / 2 >= cut_s]


def measured_window(rows: pd.DataFrame) -> Window | None:
    """From the start of the first interval with requests to the end of the last one (gaps included)."""
    active = rows[rows["requests"] > 0]
    if active.empty:
        return None
    return Window(float(active["start"].min()), float(active["end"].max()))


def _exact_timeline(rows: pd.DataFrame) -> Timeline:
    frame = pd.DataFrame(
        {
            "name": rows["Name"],
            "start": rows["Timestamp"].astype(float),
            "end": rows["Timestamp"].astype(float) + 1.0,
            "requests": rows["Requests"].fillna(0).astype(int),
            "failures": rows["Failures"].fillna(0).astype(int),
            "p50": rows["P50"],
            "p99": rows["P99"],
            "p999": rows["P99.9"],
            "max": rows["Max"],
        },
        columns=COLUMNS,
    ).reset_index(drop=True)
    return Timeline(
        frame=frame,
        source="exact",
        percentiles_kind="per second",
        per_name=True,
        started_at=float(rows["Timestamp"].min()),
    )


def _locust_timeline(history: pd.DataFrame) -> Timeline:
    per_name = bool((history["Name"] != AGGREGATED).any())
    parts = []
    for name, rows in history.groupby("Name", sort=False):
        rows = rows.sort_values("Timestamp").drop_duplicates("Timestamp", keep="last")
        timestamps = rows["Timestamp"].astype(float)
        gaps = timestamps.diff()
        step = float(gaps.median()) if len(rows) > 1 else 1.0
        # Counts are cumulative; a drop means Locust's stats were reset, and the interval then holds the new total.
        requests = rows["Total Request Count"].fillna(0).diff().fillna(rows["Total Request Count"].fillna(0))
        failures = rows["Total Failure Count"].fillna(0).diff().fillna(rows["Total Failure Count"].fillna(0))
        requests = requests.where(requests >= 0, rows["Total Request Count"])
        failures = failures.where(failures >= 0, rows["Total Failure Count"])
        parts.append(
            pd.DataFrame(
                {
                    "name": name,
                    "start": timestamps - gaps.fillna(step),
                    "end": timestamps,
                    "requests": requests.astype(int),
                    "failures": failures.astype(int),
                    "p50": _column(rows, "50%"),
                    "p99": _column(rows, "99%"),
                    "p999": _column(rows, "99.9%"),
                    "max": _column(rows, "100%"),
                },
                columns=COLUMNS,
            )
        )
    frame = pd.concat(parts, ignore_index=True)
    return Timeline(
        frame=frame,
        source="locust",
        percentiles_kind="Locust, last 10 s" if per_name else "Locust, cumulative since start",
        per_name=per_name,
        started_at=float(history["Timestamp"].min()),
    )


def _column(rows: pd.DataFrame, column: str) -> pd.Series:
    if column in rows.columns:
        return rows[column].astype(float)
    return pd.Series(float("nan"), index=rows.index)
