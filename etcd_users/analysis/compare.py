"""Before and after: is the candidate's figure worse than the baseline's by more than noise and the tolerance?

Each side is one run, several repeats of one run, or a benchmark suite's directory (compared combination by
combination). Per request name (per level of a shape's run, per combination of a suite) and per metric (QPS, P50,
P99, P99.9, error rate), the row holds both figures, the difference (relative for QPS and latency, percentage
points for errors), its 95 % interval, and a verdict:

- both sides with two repeats or more: Welch's t interval over the repeats' own figures (run-to-run noise is in
  the data);
- otherwise: a moving-block bootstrap over each side's seconds (`analysis.resampling`): the seconds are resampled in
  blocks, the exact per-second HDR histograms of the drawn seconds merged and their percentile taken, QPS and the
  error rate from the drawn seconds' counts; the interval is the central 95 % of candidate / baseline - 1 over the
  replicates.

``worse`` when the whole interval lies beyond the tolerance on the bad side (the difference exceeds the tolerance
by more than its uncertainty), ``better`` when it lies beyond the tolerance on the good side, ``same`` otherwise;
``n/a`` when a side has no figure (every request failed, no latency log).
"""

from __future__ import annotations

import glob
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from etcd_users.analysis.levels import level_windows
from etcd_users.analysis.load import AnalysisError, Run, load_run, normalize_prefix
from etcd_users.analysis.measure import Warmup, resolve_cut, run_start
from etcd_users.analysis.resampling import (
    CONFIDENCE,
    REPLICATES,
    SEED,
    LatencyCounts,
    block_weights,
    generator,
    percentile_interval,
    welch_interval,
)
from etcd_users.analysis.seconds import NameSeconds, RunSeconds, run_seconds
from etcd_users.analysis.skew import skew_note
from etcd_users.analysis.suite import read_suite
from etcd_users.analysis.tail import cause_difference_notes
from etcd_users.analysis.timeseries import timeline
from etcd_users.analysis.tolerance import LATENCY_PERCENTILES, METRICS, Metric
from etcd_users.files import AGGREGATED, RUN_DONE, SERVICE, SUFFIXES

BASELINE = "baseline"
CANDIDATE = "candidate"
WORSE, SAME, BETTER, NOT_AVAILABLE = "worse", "same", "better", "n/a"
REPEATS = "repeats"
SECONDS = "seconds"


@dataclass
class Side:
    """What one side of the comparison names: its runs per cell ("" when it is not a suite)."""

    role: str
    spec: str
    cells: dict[str, list[Run]]
    suite: bool = False

    @property
    def runs(self) -> list[Run]:
        return [run for runs in self.cells.values() for run in runs]


@dataclass
class Row:
    cell: str
    level: str
    name: str
    metric: Metric
    baseline: float | None
    candidate: float | None
    difference: float | None  # % of the baseline, or percentage points for errors
    low: float | None
    high: float | None
    tolerance: float
    verdict: str
    method: str
    sizes: tuple[int, int]  # repeats, or seconds, per side


@dataclass
class Comparison:
    baseline: Side
    candidate: Side
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)

    @property
    def worse(self) -> list[Row]:
        return [row for row in self.rows if row.verdict == WORSE]


# -- the sides ----------------------------------------------------------------------------------------------------


def load_side(spec: str, role: str) -> Side:
    """A suite directory (with suite.json), or one or more run prefixes: comma-separated, and/or glob patterns."""
    directory = Path(spec)
    if directory.is_dir() and (directory / "suite.json").is_file():
        return _suite_side(directory, spec, role)
    place, _, axis = spec.rpartition(":")
    if place and "=" in axis and (Path(place) / "suite.json").is_file():  # DIR:AXIS=VALUE, one value of an axis
        return _suite_side(Path(place), spec, role, tuple(axis.split("=", 1)))
    prefixes: list[str] = []
    for part in (part.strip() for part in spec.split(",")):
        if not part:
            continue
        if glob.has_magic(part):
            found = _expand(part)
            if not found:
                raise AnalysisError(f"{role} {part!r} matches no run (looked for {part}{SUFFIXES['stats']})")
            prefixes += found
        else:
            prefixes.append(normalize_prefix(part))
    if not prefixes:
        raise AnalysisError(f"{role}: no run given")
    duplicates = [prefix for prefix, count in Counter(prefixes).items() if count > 1]
    if duplicates:
        raise AnalysisError(f"{role}: run {duplicates[0]!r} is given twice")
    return Side(role, spec, {"": [load_run(prefix, _label(prefix, prefixes)) for prefix in prefixes]})


def _expand(pattern: str) -> list[str]:
    pattern = normalize_prefix(pattern)
    found = {
        match[: -len(SUFFIXES[kind])] for kind in ("stats", "latency") for match in glob.glob(pattern + SUFFIXES[kind])
    }
    return sorted(found)


def _label(prefix: str, prefixes: list[str]) -> str:
    path = Path(prefix)
    same_name = sum(Path(other).name == path.name for other in prefixes) > 1
    return f"{path.parent.name}/{path.name}" if same_name else path.name


def _suite_side(directory: Path, spec: str, role: str, only: tuple[str, str] | None = None) -> Side:
    """A suite's combinations, each a cell; with ``only`` (axis, value) those with that value, each labelled by its
    other axes, so that two values of one axis of a suite compare as two suites would."""
    directory, document = read_suite(directory)
    cells = {}
    combinations = [(c, str(c["label"]).split(" ")) for c in document["combinations"]]  # its axes' name=value
    if only is not None:
        named = f"{only[0]}="
        found = [(c, tokens) for c, tokens in combinations if any(t.startswith(named) for t in tokens)]
        if not found:
            raise AnalysisError(
                f"{role} {spec}: the suite has no axis {only[0]!r}; give DIR:AXIS=VALUE, one of its axes"
            )
        combinations = [
            (c, [t for t in tokens if not t.startswith(named)]) for c, tokens in found if "=".join(only) in tokens
        ]
        if not combinations:
            values = ", ".join(
                dict.fromkeys(t[len(named) :] for _, tokens in found for t in tokens if t.startswith(named))
            )
            raise AnalysisError(f"{role} {spec}: no combination has {'='.join(only)} (its values: {values})")
    for combination, tokens in combinations:
        runs = [
            load_run(str(directory / entry["prefix"]), entry["prefix"])
            for entry in combination["runs"]
            if entry["status"] == RUN_DONE
        ]
        if runs:
            cells[" ".join(tokens) or "(single combination)"] = runs
    if not cells:
        raise AnalysisError(f"{role} suite {directory} has no completed run")
    return Side(role, spec, cells, suite=True)


# -- the comparison -----------------------------------------------------------------------------------------------


def compare(
    baseline: Side,
    candidate: Side,
    tolerances: dict[str, float],
    names: list[str] | None = None,
    warmup: Warmup = None,
    series: str = SERVICE,
) -> Comparison:
    if baseline.suite != candidate.suite:
        suite, other = (baseline, candidate) if baseline.suite else (candidate, baseline)
        raise AnalysisError(
            f"{suite.role} {suite.spec} is a suite and {other.role} {other.spec} is not: compare a "
            "suite with a suite, runs with runs"
        )
    comparison = Comparison(baseline, candidate, [])
    notes = comparison.notes
    cells = [cell for cell in baseline.cells if cell in candidate.cells]
    for role, side in ((BASELINE, baseline), (CANDIDATE, candidate)):
        for cell in side.cells:
            if cell not in cells:
                notes.append(f"{cell}: only in the {role}, not compared.")
    if not cells:
        raise AnalysisError("the two suites have no combination in common")
    for cell in cells:
        seconds = {
            role: [_seconds(run, warmup, series, notes) for run in side.cells[cell]]
            for role, side in ((BASELINE, baseline), (CANDIDATE, candidate))
        }
        for level, name, groups in _groups(seconds, names, notes, cell):
            comparison.rows += _rows(cell, level, name, groups, tolerances, comparison.methods)
    if not comparison.rows:
        raise AnalysisError(f"no request name in common between the two sides{_names_text(names)}")
    for side in (baseline, candidate):  # how skewed each run's keys were: a difference the verdicts may come from
        notes += [note for cell in cells for run in side.cells[cell] if (note := skew_note(run))]
    notes += cause_difference_notes(baseline.runs, candidate.runs)
    return comparison


def _names_text(names: list[str] | None) -> str:
    return f" among {', '.join(names)}" if names else ""


def _seconds(run: Run, warmup: Warmup, series: str, notes: list[str]) -> RunSeconds:
    cut_s = resolve_cut(run, run_start(run, timeline(run, series)), warmup, notes) if warmup is not None else None
    return run_seconds(run, cut_s, series)


def _groups(seconds: dict[str, list[RunSeconds]], names: list[str] | None, notes: list[str], cell: str):
    """(level, name, {role: [NameSeconds per repeat]}) of each row group, in the order of the baseline's names."""
    per_role = {role: _names(runs) for role, runs in seconds.items()}
    common = [name for name in per_role[BASELINE] if name in per_role[CANDIDATE]]
    if AGGREGATED in common and len(common) == 2:
        common.remove(AGGREGATED)  # one name: its Aggregated row is the same
    if names:
        common = [name for name in names if name in common]
    where = f"{cell}: " if cell else ""
    for role, found in per_role.items():
        left = [name for name in found if name not in common and name != AGGREGATED and not names]
        if left:
            notes.append(f"{where}{', '.join(left)}: only in the {role}, not compared.")
    shaped = all(run.run.shape is not None for runs in seconds.values() for run in runs)
    for name in common:
        if not shaped:
            yield "", name, {role: [run.names[name] for run in runs] for role, runs in seconds.items()}
            continue
        per_level: dict[str, dict[str, list[NameSeconds]]] = {}
        for role, runs in seconds.items():
            for run in runs:
                for label, part in _levels(run, name):
                    per_level.setdefault(label, {}).setdefault(role, []).append(part)
        for label, groups in per_level.items():
            if set(groups) == {BASELINE, CANDIDATE}:
                yield label, name, groups


def _names(runs: list[RunSeconds]) -> list[str]:
    """The names every repeat has."""
    names = list(runs[0].names)
    return [name for name in names if all(name in run.names for run in runs[1:])]


def _levels(run: RunSeconds, name: str):
    """(level label, the name's seconds in that level) of each measured level of a shape's run."""
    run_end = None if run.last_second is None else run.last_second + 1
    for window in level_windows(run.run.shape, run_end):
        if window.warmup or window.start is None:
            continue
        part = run.names[name].within(window.seconds)
        if len(part.seconds):
            yield f"{window.number} {window.name}", part


# -- one row group: every metric of a name ------------------------------------------------------------------------


@dataclass
class _Figures:
    """One side's figures: the observed value of each metric and, for the bootstrap, its replicates."""

    values: dict[str, float]
    replicates: dict[str, np.ndarray] | None = None


def _figures(parts: list[NameSeconds], key: tuple[str, ...], resample: bool) -> _Figures:
    requests = np.concatenate([part.requests for part in parts]).astype(float)
    failures = np.concatenate([part.failures for part in parts]).astype(float)
    exact = all(part.exact for part in parts)
    counts = (
        LatencyCounts([part.histograms.get(int(second)) for part in parts for second in part.seconds])
        if exact
        else None
    )
    weights = np.ones((1, len(requests)))
    if resample:
        weights = np.vstack([weights, block_weights([len(part.seconds) for part in parts], generator(*key))])
    with np.errstate(divide="ignore", invalid="ignore"):
        figures = {
            "qps": weights @ requests / len(requests),
            "errors": 100 * (weights @ failures) / (weights @ requests),
        }
    percentiles = list(LATENCY_PERCENTILES.values())
    latencies = counts.percentiles_ms(weights, percentiles) if counts is not None else None
    for column, metric in enumerate(LATENCY_PERCENTILES):
        figures[metric] = latencies[:, column] if latencies is not None else np.full(len(weights), np.nan)
    values = {metric: float(found[0]) for metric, found in figures.items()}
    if not resample:
        return _Figures(values)
    return _Figures(values, {metric: found[1:] for metric, found in figures.items()})


def _rows(cell: str, level: str, name: str, groups: dict[str, list[NameSeconds]], tolerances, methods) -> list[Row]:
    by_repeat = all(len(groups[role]) >= 2 for role in (BASELINE, CANDIDATE))
    method = REPEATS if by_repeat else SECONDS
    methods.add(method)
    if by_repeat:
        repeats = {role: [_figures([part], (), False).values for part in groups[role]] for role in groups}
        pooled = {role: _figures(groups[role], (), False).values for role in groups}
        sizes = (len(groups[BASELINE]), len(groups[CANDIDATE]))
    else:
        figures = {role: _figures(groups[role], (cell, level, name, role), True) for role in groups}
        sizes = tuple(sum(len(part.seconds) for part in groups[role]) for role in (BASELINE, CANDIDATE))
    rows = []
    for metric in METRICS:
        relative = metric.unit == "%"
        if by_repeat:
            a = [values[metric.key] for values in repeats[BASELINE]]
            b = [values[metric.key] for values in repeats[CANDIDATE]]
            base, cand = float(np.mean(a)), float(np.mean(b))
            if not all(map(math.isfinite, [*a, *b])) or (relative and base == 0):
                difference = low = high = math.nan
                base = pooled[BASELINE][metric.key] if math.isfinite(base) else base
            else:
                difference, low, high = welch_interval(a, b)
                if relative:
                    difference, low, high = (100 * value / base for value in (difference, low, high))
        else:
            base, cand = figures[BASELINE].values[metric.key], figures[CANDIDATE].values[metric.key]
            if relative:
                with np.errstate(divide="ignore", invalid="ignore"):
                    difference = 100 * (cand / base - 1) if base else math.nan
                    replicated = 100 * (
                        figures[CANDIDATE].replicates[metric.key] / figures[BASELINE].replicates[metric.key] - 1
                    )
            else:
                difference = cand - base
                replicated = figures[CANDIDATE].replicates[metric.key] - figures[BASELINE].replicates[metric.key]
            low, high = percentile_interval(replicated) if math.isfinite(difference) else (math.nan, math.nan)
        tolerance = tolerances[metric.key]
        rows.append(
            Row(
                cell,
                level,
                name,
                metric,
                _number(base),
                _number(cand),
                _number(difference),
                _number(low),
                _number(high),
                tolerance,
                verdict(metric, low, high, tolerance),
                method,
                sizes,
            )
        )
    return rows


def _number(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def verdict(metric: Metric, low: float | None, high: float | None, tolerance: float) -> str:
    """worse when the whole interval lies beyond the tolerance on the bad side; better when it lies beyond it on
    the good side; same otherwise."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return NOT_AVAILABLE
    if metric.higher_is_worse:
        return WORSE if low > tolerance else BETTER if high < -tolerance else SAME
    return WORSE if high < -tolerance else BETTER if low > tolerance else SAME


def method_notes(comparison: Comparison) -> list[str]:
    """How the differences, intervals and verdicts were computed; shown under every table."""
    level = f"{CONFIDENCE * 100:g} %"
    notes = [
        "difference = candidate / baseline - 1 for QPS and latencies, candidate - baseline in percentage points (pp) "
        f"for the error rate; interval = its {level} interval; verdict worse when the whole interval lies beyond "
        "the tolerance on the bad side (higher latency or errors, lower QPS), better when it lies beyond the "
        "tolerance on the good side, same otherwise."
    ]
    if SECONDS in comparison.methods:
        notes.append(
            f"interval (seconds): moving-block bootstrap over each side's whole seconds ({REPLICATES} replicates, "
            f"seed {SEED}, blocks of ceil(n^(1/3)) seconds, never across runs): percentiles of the merged exact HDR "
            "histograms of the drawn seconds, QPS and error rate from their counts; the runs' partial first and "
            "last seconds are left out. It holds each run's own noise, not what changed on the machine between "
            "the runs: where other work shares the machine, compare interleaved repeats."
        )
    if REPEATS in comparison.methods:
        notes.append(
            f"interval (repeats): Welch's t interval ({level}) over the repeats' own figures, relative to the "
            "baseline's mean; each figure is the mean over the repeats."
        )
    return notes
