"""The tail of each run in the analysis (``PREFIX_tail.json``, written by ``etcd_users.features.tail``): its worst
seconds with the events beside them as a table, the events marked on its latency per second (a chart), the source
reports' precondition as a note beside the tables, and, in ``analysis compare``, the causes one side's worst seconds
had that the other's lacked."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from etcd_users.analysis.load import Run, optional_json
from etcd_users.analysis.report import markdown_table
from etcd_users.features.tail.events import UNEXPLAINED
from etcd_users.files import SERVICE

CHART_STEM = "tail"
_SVG_METADATA = {"Date": None}  # the same run draws the same file


def tail_of(run: Run) -> dict | None:
    found = optional_json(run.path("tail"))
    return found if isinstance(found, dict) else None


def precondition_note(run: Run) -> str | None:
    """Whether the run's window had no compaction or snapshot and WAL fsync P99 under 10 ms: the condition the
    single-member against cluster tables of etcd's reports hold under."""
    found = (tail_of(run) or {}).get("precondition")
    if not isinstance(found, dict):
        return None
    rule = "no compaction or snapshot, WAL fsync P99 under 10 ms"
    if found.get("met"):
        return f"{run.label}: the window met the source reports' precondition ({rule})."
    broken = found.get("broken_by")
    return f"{run.label}: the window did not meet the source reports' precondition ({rule}): {broken} first."


def _causes(item: dict) -> list[str]:
    return [cause.get("cause", "") for cause in item.get("causes") or ()]


def worst_seconds_table(runs: Sequence[Run]) -> pd.DataFrame | None:
    """A row per worst second of each run that has a tail: its exact P99, requests, errors and the events beside it."""
    rows = []
    for run in runs:
        for item in (tail_of(run) or {}).get("seconds") or ():
            named = [
                f"{cause['cause']}" + (f" on {cause['member']}" if cause.get("member") else "")
                for cause in item.get("causes") or ()
            ]
            rows.append(
                {
                    "run": run.label,
                    "second": item.get("second"),
                    "at_utc": time.strftime("%H:%M:%S", time.gmtime(item.get("at") or 0)),
                    "p99_ms": item.get("p99_ms"),
                    "waited_ms": item.get("waited_ms"),  # nothing ended in it: the request on the wire through it
                    "requests": item.get("requests"),
                    "errors": item.get("errors"),
                    "beside": "; ".join(dict.fromkeys(named)),
                }
            )
    if not rows:
        return None
    table = pd.DataFrame(rows)
    return table.drop(columns="waited_ms") if table["waited_ms"].isna().all() else table


def tail_chart(runs: Sequence[Run], out: Path) -> list[Path]:
    """Each run's P99 per second (every request name's, from PREFIX_latency_history.csv) with its events marked at
    the seconds they were seen; [] when no run has both."""
    # matplotlib only here: the commands that draw nothing start faster without it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    drawn = [
        (run, tail_of(run))
        for run in runs
        if run.latency_history is not None and len(run.latency_history) and tail_of(run) is not None
    ]
    if not drawn:
        return []
    figure = Figure(figsize=(10, 3.2 * len(drawn)))
    for index, (run, tail) in enumerate(drawn, start=1):
        axes = figure.add_subplot(len(drawn), 1, index)
        history = run.latency_history
        history = history[history["Series"] == SERVICE]
        start = float(history["Timestamp"].min())
        for name, rows in history.groupby("Name"):
            axes.plot(rows["Timestamp"] - start, rows["P99"], label=f"{name} P99", linewidth=1)
        marked = set()
        for event in tail.get("events") or ():
            cause = str(event.get("cause"))
            at = float(event.get("at", start)) - start
            axes.axvline(at, color="tab:red", alpha=0.35, linewidth=1)
            if (cause, int(at)) not in marked:
                marked.add((cause, int(at)))
                axes.annotate(
                    cause,
                    (at, 1.0),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    fontsize=7,
                    va="top",
                    ha="right",
                    color="tab:red",
                )
        axes.set_title(f"{run.label}: P99 per second (ms) and the tail's events")
        axes.set_xlabel("seconds from the run's first")
        axes.set_ylabel("P99 ms")
        axes.legend(loc="upper left", fontsize=7)
    figure.tight_layout()
    FigureCanvasAgg(figure)
    stem = out / CHART_STEM
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    figure.savefig(paths[0], dpi=110)
    figure.savefig(paths[1], metadata=_SVG_METADATA)
    return paths


def cause_difference_notes(baseline: Sequence[Run], candidate: Sequence[Run]) -> list[str]:
    """``analysis compare``: the causes named beside one side's worst seconds that none of the other side's had (a
    difference the verdicts may come from, not one they prove)."""
    sides = {"baseline": baseline, "candidate": candidate}
    causes = {}
    for role, runs in sides.items():
        tails = [tail for run in runs if (tail := tail_of(run)) is not None]
        if not tails:
            return []
        causes[role] = {cause for tail in tails for item in tail.get("seconds") or () for cause in _causes(item)}
        causes[role].discard(UNEXPLAINED)
    notes = []
    for role, other in (("baseline", "candidate"), ("candidate", "baseline")):
        only = sorted(causes[role] - causes[other])
        if only:
            notes.append(
                f"the {role}'s worst seconds had {', '.join(only)} beside them and the {other}'s did not "
                "(PREFIX_tail.json): a difference the verdicts may come from."
            )
    return notes


def show_tail(runs: Sequence[Run], out: Path | None) -> None:
    """After the comparison's table and its notes: the runs' worst seconds with their events, and the chart with
    ``--out``."""
    table = worst_seconds_table(runs)
    if table is None:
        return
    print()
    print("Worst seconds and the events beside them (PREFIX_tail.json; a coincidence in time, not a proof):")
    print()
    print(markdown_table(table))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        tail_chart(runs, out)
