"""The members' side of a run, from ``PREFIX_etcd_metrics.csv`` (one row per member per poll, written by
``etcd_users.server_metrics``): the server columns of the comparison table and the series of its chart.

Only a member's answered polls count (``Error`` empty), in time order. Its cumulative counters (``CpuSeconds``,
``LeaderChanges``, ``ProposalsFailed``) start again at 0 when the member restarts, so a drop in any of them marks a
restart between two polls. The window is the whole file, or with a warm-up cut the polls at or after the cut; the
first poll of each member in the window is its baseline, and every figure comes from the intervals between its
consecutive answered polls after that:

- ``fsync P99 (ms)``: the highest per-interval WAL fsync P99 (``FsyncP99Ms``) of any member. The worst interval is
  what etcd's disk guideline (fsync P99 below 10 ms) and its alerts judge, and a disk stall shows only there; the
  note gives the median interval beside it, since the maximum grows with the number of intervals.
- ``leader changes``: the most that any one member counted (increases of ``LeaderChanges``). Every member counts
  every change it sees, so a sum would count each election once per member. A restarted member counts again from
  0, and its first count is the leader it finds on start, which is not a change of the cluster's leader.
- ``RSS growth (MB)``, ``db growth (MB)``: last minus first poll of ``RssBytes`` and ``DbSizeBytes`` per member, the
  largest member (MB = 10^6 bytes). A gauge needs no restart handling: the difference spans it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from etcd_users.analysis.measure import RunMeasurement, run_start

FSYNC = "fsync P99 (ms)"
LEADER_CHANGES = "leader changes"
RSS_GROWTH = "RSS growth (MB)"
DB_GROWTH = "db growth (MB)"
SERVER_COLUMNS = (FSYNC, LEADER_CHANGES, RSS_GROWTH, DB_GROWTH)
MB = 1_000_000
RESTART_COUNTERS = ("CpuSeconds", "LeaderChanges", "ProposalsFailed")

DEFINITIONS = (
    f"Server columns, from each run's _etcd_metrics.csv over the polls in its window: {FSYNC} = the highest "
    "per-interval WAL fsync P99 of any member; leader changes = the most any one member counted (each member counts "
    "every change, so a sum would count each once per member; restarts handled); RSS and db growth = last minus "
    "first poll of each member, the largest member, MB = 10^6 bytes."
)


@dataclass
class MemberSeries:
    """One member's answered polls in time order; ``restart`` marks a poll after which the counters went back."""

    member: str
    rows: pd.DataFrame


@dataclass
class ServerFigures:
    """The server columns of one run, and what the reader should know about them."""

    fsync_p99_ms: float | None = None
    leader_changes: int | None = None
    rss_growth_mb: float | None = None
    db_growth_mb: float | None = None
    notes: list[str] = field(default_factory=list)

    def cell(self, column: str) -> float | int | None:
        return {
            FSYNC: self.fsync_p99_ms,
            LEADER_CHANGES: self.leader_changes,
            RSS_GROWTH: self.rss_growth_mb,
            DB_GROWTH: self.db_growth_mb,
        }[column]


def member_series(frame: pd.DataFrame, cut_s: float | None = None) -> list[MemberSeries]:
    """Each member's answered polls at or after ``cut_s`` (all with None), members in the order first written."""
    rows = frame if cut_s is None else frame[frame["Timestamp"] >= cut_s]
    answered = rows[rows["Error"] == ""]
    series = []
    for member in dict.fromkeys(frame["Member"]):
        mine = answered[answered["Member"] == member].copy()
        restart = pd.Series(False, index=mine.index)
        for column in RESTART_COUNTERS:
            if column in mine.columns:
                restart |= mine[column].dropna().diff().lt(0).reindex(mine.index, fill_value=False)
        mine["restart"] = restart
        series.append(MemberSeries(member, mine))
    return series


def counter_increase(rows: pd.DataFrame, column: str, counted_on_start: float = 0.0) -> float:
    """How much a cumulative counter went up over the rows; after a restart it began again at ``counted_on_start``."""
    values = rows[column].dropna()
    if len(values) < 2:
        return 0.0
    steps = values.diff()
    restarted = rows.loc[values.index, "restart"].astype(bool)
    steps[restarted] = (values[restarted] - counted_on_start).clip(lower=0)
    return float(steps.iloc[1:].sum())


def interval_rates(rows: pd.DataFrame, column: str) -> pd.Series:
    """Per second over each interval since the previous poll; NaN for the first poll and across a restart."""
    rates = rows[column].diff() / rows["Timestamp"].diff()
    rates[rows["restart"].astype(bool) | (rates < 0)] = float("nan")
    return rates


def leader_change_times(series: list[MemberSeries]) -> list[float]:
    """Poll times at which some member had counted a leader change since its previous poll (restarts excluded)."""
    times: set[float] = set()
    for member in series:
        rows = member.rows.dropna(subset=["LeaderChanges"])
        steps = rows["LeaderChanges"].diff()
        changed = (steps > 0) & ~rows["restart"].astype(bool)
        times.update(float(t) for t in rows.loc[changed, "Timestamp"])
    return sorted(times)


def server_figures(measured: RunMeasurement) -> ServerFigures | None:
    """The server columns of a measured run; None when it has no ``_etcd_metrics.csv``."""
    run = measured.run
    frame = run.etcd_metrics
    if frame is None:
        return None
    name = run.path("etcd_metrics").name
    figures = ServerFigures()
    cut_s = measured.cut_s
    start = run_start(run, measured.timeline)
    if start is None:
        start = float(frame["Timestamp"].min()) if len(frame) else 0.0
    window = "whole run" if cut_s is None else f"after the warm-up cut at +{cut_s - start:g} s"
    polls = frame if cut_s is None else frame[frame["Timestamp"] >= cut_s]
    series = member_series(frame, cut_s)
    if polls.empty or all(member.rows.empty for member in series):
        figures.notes.append(f"{run.label}: {name} has no answered poll ({window}); server columns empty.")
        return figures

    fsync_values = pd.concat([member.rows["FsyncP99Ms"].iloc[1:] for member in series]).dropna()
    if len(fsync_values):
        figures.fsync_p99_ms = float(fsync_values.max())
    if any(len(member.rows) > 1 for member in series):
        changes = [counter_increase(member.rows, "LeaderChanges", counted_on_start=1) for member in series]
        figures.leader_changes = int(round(max(changes)))
    figures.rss_growth_mb = _largest_growth(series, "RssBytes")
    figures.db_growth_mb = _largest_growth(series, "DbSizeBytes")

    times = polls["Timestamp"]
    members = len(series)
    median = f"median interval {fsync_values.median():.3f} ms" if len(fsync_values) else "no fsync samples"
    figures.notes.append(
        f"{run.label}: server columns from {name}: {members} member{'s' * (members > 1)}, "
        f"{times.nunique()} polls from +{times.min() - start:.1f} s to +{times.max() - start:.1f} s ({window}); "
        f"{FSYNC} is the worst of {len(fsync_values)} member intervals ({median})."
    )
    for member in series:
        errors = polls[(polls["Member"] == member.member) & (polls["Error"] != "")]
        if len(errors):
            total = int((polls["Member"] == member.member).sum())
            figures.notes.append(
                f"{run.label}: {member.member} did not answer {len(errors)} of {total} polls "
                f"(first at +{errors['Timestamp'].iloc[0] - start:.1f} s: {errors['Error'].iloc[0]})."
            )
        for when in member.rows.loc[member.rows["restart"], "Timestamp"]:
            figures.notes.append(
                f"{run.label}: {member.member} restarted before the poll at +{when - start:.1f} s (its counters went "
                "back); its leader changes count from there, its RSS and db growth span the restart."
            )
        if len(member.rows) < 2:
            figures.notes.append(
                f"{run.label}: {member.member} answered {len(member.rows)} poll(s) in the window; left out of the "
                "server columns."
            )
    return figures


def _largest_growth(series: list[MemberSeries], column: str) -> float | None:
    growths = []
    for member in series:
        values = member.rows[column].dropna()
        if len(values) > 1:
            growths.append(float(values.iloc[-1] - values.iloc[0]) / MB)
    return max(growths) if growths else None


def missing_note(measured: RunMeasurement) -> str:
    name = measured.run.path("etcd_metrics").name
    return (
        f"{measured.run.label}: no {name}, so its server columns are empty (the run writes it with --csv and "
        "--etcd-metrics-interval above 0)."
    )


def add_server_columns(table: pd.DataFrame, runs: list[RunMeasurement]) -> tuple[pd.DataFrame, list[str]]:
    """The table with the server columns (the same values on each row of a run) and their notes; unchanged, without
    notes, when no run has a ``_etcd_metrics.csv``."""
    figures = {measured.run.label: server_figures(measured) for measured in runs}
    if all(value is None for value in figures.values()):
        return table, []
    notes = [DEFINITIONS]
    for measured in runs:
        found = figures[measured.run.label]
        notes += found.notes if found is not None else [missing_note(measured)]
    table = table.copy()
    for column in SERVER_COLUMNS:
        values = [None if figures.get(label) is None else figures[label].cell(column) for label in table["run"]]
        if column == LEADER_CHANGES:  # a count: nullable integers, so that a run without the file shows nothing
            table[column] = pd.array([pd.NA if value is None else value for value in values], dtype="Int64")
        else:
            table[column] = pd.Series([float("nan") if v is None else v for v in values], index=table.index)
    return table, notes
