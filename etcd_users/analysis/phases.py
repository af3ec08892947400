"""A run split by the etcd versions its members ran: all on the first version, mixed while members are upgraded or
rolled back one at a time, all on the next, with each phase's throughput and exact latencies per request name, so
that what a new version does to the workload shows in the run that upgraded to it.

The members' versions at the start come from the summary's pre-flight (``PREFIX_summary.json``); each step of an
``upgrade`` or ``rollback`` window (``PREFIX_disruptions.json``) takes its member down at its stop and back on its
``version_after`` once caught up. A phase holds the whole seconds inside it (a second that a change cuts belongs to
neither side), read from the exact files as the disruptions' cost is (``analysis.disruptions.per_second``).
``version_phases`` is pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from etcd_users import hdr
from etcd_users.analysis.disruptions import load_windows, per_second
from etcd_users.analysis.fairness import read_summary
from etcd_users.analysis.load import Run

VERSION_ACTIONS = ("upgrade", "rollback")
COLUMNS = (
    *("run", "phase", "from (s)", "to (s)", "seconds", "name", "requests", "QPS"),
    *("P50 (ms)", "P99 (ms)", "P99.9 (ms)", "errors"),
)
DECIMALS = {"from (s)": 1, "to (s)": 1, "QPS": 1, "P50 (ms)": 3, "P99 (ms)": 3, "P99.9 (ms)": 3}
NOTES = [
    "a phase: all members up on one version, or mixed from the first member stopped to the last one caught up on its "
    "new version (a member down, or members on two versions); from and to in seconds from the run's first second",
    "each phase holds the whole seconds inside it: a second that a change cuts belongs to neither side; QPS, "
    "percentiles and errors of the service series, exact (HDR) over those seconds",
]


@dataclass(frozen=True)
class Phase:
    started: float  # unix time
    ended: float
    versions: tuple[str, ...]  # the versions members ran during it, sorted
    whole: bool  # every member up on its one version throughout

    @property
    def label(self) -> str:
        """``all 3.4.23``, ``mixed 3.4.23 + 3.5.1``, ``3.5.1, a member down`` (a refused rollback's restart)."""
        if self.whole:
            return f"all {self.versions[0]}"
        if len(self.versions) == 1:
            return f"{self.versions[0]}, a member down"
        return "mixed " + " + ".join(self.versions) if self.versions else "no member up"


def version_phases(start_versions: dict[str, str], windows: Sequence[dict], begin: float, end: float) -> list[Phase]:
    """The phases of ``[begin, end)`` from every member's version at the start and the steps of the upgrade and
    rollback windows; one phase when nothing changed a version."""
    versions: dict[str, str | None] = dict(start_versions)
    changes: list[tuple[float, str, str | None]] = []  # when, member, its version from then (None: down)
    for window in windows:
        if window.get("action") not in VERSION_ACTIONS:
            continue
        for step in window.get("steps") or []:
            member, stopped = step.get("member"), step.get("stop_at")
            if member is None or stopped is None:
                continue
            changes.append((stopped, member, None))
            back = step.get("restart_caught_up_at") or step.get("caught_up_at") or step.get("healthy_at")
            after = step.get("version_before") if "refused" in step else step.get("version_after")
            if back is not None:
                changes.append((back, member, after))
    phases: list[Phase] = []
    moment = begin
    for when, member, version in sorted(changes, key=lambda change: change[0]):
        if when > moment:
            phases = _extended(phases, _phase(versions, moment, min(when, end)))
            moment = when
        versions[member] = version
    if end > moment:
        phases = _extended(phases, _phase(versions, moment, end))
    return [phase for phase in phases if phase.ended > phase.started]


def _phase(versions: dict[str, str | None], started: float, ended: float) -> Phase:
    present = tuple(sorted({version for version in versions.values() if version is not None}))
    return Phase(started, ended, present, len(present) == 1 and None not in versions.values())


def _extended(phases: list[Phase], phase: Phase) -> list[Phase]:
    """``phase`` after ``phases``: one with the last when both are all on one version, or both are not (a mixed
    phase runs from the first member stopped to the last caught up)."""
    if not phases:
        return [phase]
    last = phases[-1]
    if last.whole and phase.whole and last.versions == phase.versions:
        return [*phases[:-1], Phase(last.started, phase.ended, last.versions, True)]
    if not last.whole and not phase.whole:
        versions = tuple(sorted(set(last.versions) | set(phase.versions)))
        return [*phases[:-1], Phase(last.started, phase.ended, versions, False)]
    return [*phases, phase]


def measure(run: Run) -> pd.DataFrame | None:
    """One row per phase and request name; None when no upgrade or rollback changed a member's version."""
    windows = load_windows(run.prefix)
    if not windows or not any(window.get("action") in VERSION_ACTIONS for window in windows):
        return None
    summary = read_summary(run) or {}
    members = ((summary.get("environment") or {}).get("cluster") or {}).get("members") or []
    start_versions = {member["endpoint"]: member.get("version") for member in members if member.get("endpoint")}
    if not start_versions:  # without every member's version at the start, a phase cannot tell "all" from "mixed"
        return None
    data = per_second(run)
    seconds = sorted({second for by_second in data.values() for second in by_second})
    if not seconds:
        return None
    first, last = seconds[0], seconds[-1] + 1
    rows = []
    for phase in version_phases(start_versions, windows, first, last):
        inside = range(math.ceil(phase.started), math.floor(phase.ended))
        for name, by_second in sorted(data.items()):
            rows.append(_row(run, phase, first, name, [by_second[s] for s in inside if s in by_second], len(inside)))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(run: Run, phase: Phase, first: float, name: str, seconds: list, length: int) -> dict:
    histogram = hdr.merge(second.histogram for second in seconds if second.histogram is not None)
    successes = sum(second.successes for second in seconds)
    errors = sum(second.failures for second in seconds)
    p50, p99, p999 = (
        (value / 1000.0 for value in hdr.percentiles_us(histogram, (50.0, 99.0, 99.9)))
        if histogram is not None and histogram.total_count
        else (math.nan,) * 3
    )
    return {
        "run": run.label,
        "phase": phase.label,
        "from (s)": phase.started - first,
        "to (s)": phase.ended - first,
        "seconds": length,
        "name": name,
        "requests": successes + errors,
        "QPS": successes / length if length else math.nan,
        "P50 (ms)": p50,
        "P99 (ms)": p99,
        "P99.9 (ms)": p999,
        "errors": errors,
    }
