"""Before and after: is the candidate's figure worse than the baseline's by more than noise and the tolerance?

Each side is one run, several repeats of one run, or a benchmark suite's directory (compared combination by
combination). Per request name (per level of a shape's run, per combination of a suite) and per metric (QPS, P50,
P99, P99.9, error rate), the row holds both figures, the difference (relative for QPS and latency, percentage
points for errors), its 95 % interval, and a verdict:

- both sides with two repeats or more: the exact Mann-Whitney U interval of the shift between the repeats' own
  figures (`analysis.rank_test`; run-to-run noise is in the data), which needs 4 runs a side to decide;
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

from etcd_users.analysis.compare_load import load_lines
from etcd_users.analysis.compare_noise import (
    CALIBRATED,
    DRIFT,
    LEAST_CALIBRATION_RUNS,
    RUNS,
    Calibration,
    Noise,
    calibration_document,
    drift_spread,
    scale,
)
from etcd_users.analysis.levels import level_windows
from etcd_users.analysis.load import AnalysisError, Run, load_run, normalize_prefix
from etcd_users.analysis.measure import Warmup, resolve_cut, run_start
from etcd_users.analysis.rank_test import least_runs, runs_a_side, shift_interval
from etcd_users.analysis.resampling import (
    CONFIDENCE,
    REPLICATES,
    SEED,
    LatencyCounts,
    block_weights,
    generator,
    percentile_interval,
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
INCONCLUSIVE = "inconclusive"
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
    detectable: float | None = None  # the smallest difference these data would have called worse
    runs_needed: int | None = None  # runs a side that find twice the tolerance worse 80 % of the time
    noise: str = ""  # what the run-to-run noise rests on: the repeats, a calibration, or the runs' own drift
    decide_runs: int | None = (
        None  # for an undecided row: runs a side that would tell its difference from the tolerance
    )


@dataclass
class Comparison:
    baseline: Side
    candidate: Side
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)
    per_second: list[str] = field(default_factory=list)  # robust per-second figures beside the whole-run ones
    load: list[str] = field(default_factory=list)  # a line when the sides ran on an unequally busy machine

    @property
    def worse(self) -> list[Row]:
        return [row for row in self.rows if row.verdict == WORSE]

    @property
    def inconclusive(self) -> list[Row]:
        return [row for row in self.rows if row.verdict == INCONCLUSIVE]


@dataclass
class _Context:
    """What every row group of a comparison shares."""

    tolerances: dict[str, float]
    calibration: Calibration | None
    methods: set[str]
    notes: list[str]
    per_second: list[str]
    load_differs: bool  # the sides' machine load differed: a calibration (made under one load) cannot vouch


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
    calibration: Calibration | None = None,
) -> Comparison:
    if baseline.suite != candidate.suite:
        suite, other = (baseline, candidate) if baseline.suite else (candidate, baseline)
        raise AnalysisError(
            f"{suite.role} {suite.spec} is a suite and {other.role} {other.spec} is not: compare a "
            "suite with a suite, runs with runs"
        )
    comparison = Comparison(baseline, candidate, [], load=load_lines(baseline.runs, candidate.runs))
    notes = comparison.notes
    context = _Context(tolerances, calibration, comparison.methods, notes, comparison.per_second, bool(comparison.load))
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
        uncut = {role: [run.run.label for run in runs if run.cut_s is None] for role, runs in seconds.items()}
        if (
            warmup is not None
            and any(uncut.values())
            and not all(len(uncut[role]) == len(seconds[role]) for role in seconds)
        ):
            where = f"{cell}: " if cell else ""
            left = "; ".join(f"{role} {', '.join(labels)}" for role, labels in uncut.items() if labels)
            notes.append(
                f"{where}warm-up not trimmed alike: no cut on {left} while other runs were cut; give --warmup SECONDS "
                "to leave out the same seconds of every run."
            )
        for level, name, groups in _groups(seconds, names, notes, cell):
            comparison.rows += _rows(cell, level, name, groups, context)
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


def name_figures(part: NameSeconds) -> dict[str, float]:
    """One name's figures over one run's seconds (metric key -> value), as a comparison computes them."""
    return _figures([part], (), False).values


def _rows(cell: str, level: str, name: str, groups: dict[str, list[NameSeconds]], context: _Context) -> list[Row]:
    by_repeat = all(len(groups[role]) >= 2 for role in (BASELINE, CANDIDATE))
    method = REPEATS if by_repeat else SECONDS
    context.methods.add(method)
    if by_repeat:
        repeats = {role: [_figures([part], (), False).values for part in groups[role]] for role in groups}
        pooled = {role: _figures(groups[role], (), False).values for role in groups}
        sizes = (len(groups[BASELINE]), len(groups[CANDIDATE]))
    else:
        figures = {role: _figures(groups[role], (cell, level, name, role), True) for role in groups}
        halves = [halved for role in (BASELINE, CANDIDATE) for part in groups[role] if (halved := _halves(part))]
        sizes = tuple(sum(len(part.seconds) for part in groups[role]) for role in (BASELINE, CANDIDATE))
    line = _per_second_line(cell, level, name, groups)
    if line:
        context.per_second.append(line)
    rows = []
    for metric in METRICS:
        tolerance = context.tolerances[metric.key]
        if by_repeat:
            a = [values[metric.key] for values in repeats[BASELINE]]
            b = [values[metric.key] for values in repeats[CANDIDATE]]
            found = _by_ranks(metric, a, b, tolerance, pooled)
        else:
            drift = drift_spread([(first[metric.key], second[metric.key]) for first, second in halves], metric)
            calibrated = None
            if context.calibration is not None:
                calibrated, note = context.calibration.noise(name, metric)
                if note and note not in context.notes:
                    context.notes.append(note)
            found = _by_seconds(metric, figures, tolerance, drift, calibrated, context.load_differs)
        rows.append(Row(cell, level, name, metric, tolerance=tolerance, method=method, sizes=sizes, **found))
    return rows


PER_SECOND = {"P50": 50.0, "P99": 99.0}


def _per_second_line(cell: str, level: str, name: str, groups: dict[str, list[NameSeconds]]) -> str | None:
    """The median over each side's seconds of each second's P50 and P99: a stall or a slow fsync that spans a few
    seconds moves them little, where it can move a whole run's P99 a lot."""
    medians = {}
    for role in (BASELINE, CANDIDATE):
        histograms = [
            part.histograms[int(second)]
            for part in groups[role]
            for second in part.seconds
            if int(second) in part.histograms
        ]
        if not histograms:
            return None
        per_second = LatencyCounts(histograms).each_second_ms(list(PER_SECOND.values()))
        medians[role] = np.nanmedian(per_second, axis=0)
    figures = []
    for column, label in enumerate(PER_SECOND):
        base, cand = float(medians[BASELINE][column]), float(medians[CANDIDATE][column])
        change = f" ({100 * (cand / base - 1):+.1f} %)" if base > 0 else ""
        figures.append(f"median {label} {base:.3f} → {cand:.3f} ms{change}")
    where = "/".join(part for part in (cell, level, name) if part)
    return (
        f"per second ({where}): {', '.join(figures)}; each second's own percentile, robust to a stall of a few seconds."
    )


def _halves(part: NameSeconds) -> tuple[dict[str, float], dict[str, float]] | None:
    """A run's figures over the first and the second half of its seconds (None below 4 seconds)."""
    if len(part.seconds) < 4:
        return None
    first, middle, last = int(part.seconds[0]), int(part.seconds[len(part.seconds) // 2]), int(part.seconds[-1])
    return (
        _figures([part.within(range(first, middle))], (), False).values,
        _figures([part.within(range(middle, last + 1))], (), False).values,
    )


def _change(metric: Metric, scaled: float) -> float:
    """A difference on the noise's scale (log ratio, or pp) as the table shows it (% of the baseline, or pp)."""
    if metric.unit != "%":
        return scaled
    if scaled == -math.inf:
        return -100.0
    return 100 * math.expm1(scaled) if math.isfinite(scaled) else math.nan


def _scaled_change(metric: Metric, change: float) -> float:
    if metric.unit != "%":
        return change
    return math.log1p(change / 100) if change > -100 else -math.inf


def _bad_tolerance(metric: Metric, tolerance: float, times: float = 1.0) -> float:
    """The tolerance on the noise's scale, on the bad side (negative for QPS); ``times`` the tolerance."""
    change = times * tolerance if metric.higher_is_worse else -min(times * tolerance, 99.0)
    return _scaled_change(metric, change)


def _margin(metric: Metric, tolerance: float) -> float:
    """How far twice the tolerance lies beyond the tolerance, on the noise's scale: the shift 'runs a side' are for."""
    return abs(_bad_tolerance(metric, tolerance, 2) - _bad_tolerance(metric, tolerance))


def _detectable(metric: Metric, tolerance: float, shift: float, low: float, high: float) -> float | None:
    """The smallest difference these data would have called worse: the tolerance plus the interval's half-width on
    the bad side."""
    half = (shift - low) if metric.higher_is_worse else (high - shift)
    if not math.isfinite(half):
        return None
    bad = _bad_tolerance(metric, tolerance)
    return _number(_change(metric, bad + half if metric.higher_is_worse else bad - half))


def _decide_runs(metric: Metric, tolerance: float, shift: float, spread: float) -> int | None:
    """Runs a side that would tell the observed shift from the tolerance (80 % of the time)."""
    if not math.isfinite(shift):
        return None
    return runs_a_side(spread, abs(shift - _bad_tolerance(metric, tolerance)), rank=True)


def _by_ranks(metric: Metric, a: list[float], b: list[float], tolerance: float, pooled) -> dict:
    """Two or more runs a side: the rank interval of the shift of the repeats' figures (Mann–Whitney U)."""
    base, cand = float(np.median(a)), float(np.median(b))
    ya, yb = [scale(metric, value) for value in a], [scale(metric, value) for value in b]
    if not all(map(math.isfinite, [*ya, *yb])):
        base = pooled[BASELINE][metric.key] if math.isfinite(base) else base
        return {"baseline": _number(base), "candidate": _number(cand), **_unavailable()}
    spread = math.sqrt(
        (np.var(ya, ddof=1) * (len(ya) - 1) + np.var(yb, ddof=1) * (len(yb) - 1)) / (len(ya) + len(yb) - 2)
    )
    shift, low, high = shift_interval(ya, yb, CONFIDENCE)
    found = {
        "baseline": _number(base),
        "candidate": _number(cand),
        "difference": _number(_change(metric, shift)),
        "low": None,
        "high": None,
        "noise": RUNS,
        "runs_needed": runs_a_side(spread, _margin(metric, tolerance)),
    }
    if math.isfinite(low):
        change_low, change_high = _change(metric, low), _change(metric, high)
        decided = verdict(metric, change_low, change_high, tolerance)
        return found | {
            "low": _number(change_low),
            "high": _number(change_high),
            "verdict": decided,
            "detectable": _detectable(metric, tolerance, shift, low, high),
        }
    # too few runs for a 95 % rank interval: the pairwise differences' whole range can only say 'same'
    differences = np.subtract.outer(np.asarray(yb), np.asarray(ya))
    ranged = verdict(metric, _change(metric, differences.min()), _change(metric, differences.max()), tolerance)
    inconclusive = ranged in (WORSE, BETTER)
    return found | {
        "verdict": INCONCLUSIVE if inconclusive else SAME,
        "decide_runs": max(least_runs(), _decide_runs(metric, tolerance, shift, spread) or 0),
    }


def _by_seconds(
    metric: Metric, figures, tolerance: float, drift: float, calibrated: Noise | None, load_differs: bool
) -> dict:
    """One run on a side: the bootstrap over the runs' seconds, widened by run-to-run noise (the calibration's, else
    the runs' own drift); without a calibration a verdict beyond the tolerance is only 'inconclusive', since the
    drift is a lower bound of the noise, and so it is when the sides ran under different machine load, which a
    calibration made under one load does not hold."""
    base, cand = figures[BASELINE].values[metric.key], figures[CANDIDATE].values[metric.key]
    found = {"baseline": _number(base), "candidate": _number(cand)}
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric.unit == "%":
            difference = 100 * (cand / base - 1) if base else math.nan
            replicated = 100 * (
                figures[CANDIDATE].replicates[metric.key] / figures[BASELINE].replicates[metric.key] - 1
            )
        else:
            difference = cand - base
            replicated = figures[CANDIDATE].replicates[metric.key] - figures[BASELINE].replicates[metric.key]
    if not math.isfinite(difference):
        return found | _unavailable()
    boot_low, boot_high = percentile_interval(replicated)
    shift = _scaled_change(metric, difference)
    if not math.isfinite(shift) or not (math.isfinite(boot_low) and math.isfinite(boot_high)):
        return found | _unavailable()
    below = max(shift - _scaled_change(metric, boot_low), 0.0)
    above = max(_scaled_change(metric, boot_high) - shift, 0.0)
    # a calibration measured run-to-run noise itself; the drift of a run's halves (a few seconds each) is mostly the
    # sampling noise the bootstrap already holds, so it stands in only where there is no calibration
    noise = calibrated if calibrated is not None else Noise(drift, DRIFT)
    extra = noise.quantile * math.sqrt(2) * noise.spread if math.isfinite(noise.spread) else 0.0
    low, high = shift - math.hypot(below, extra), shift + math.hypot(above, extra)
    change_low, change_high = _change(metric, low), _change(metric, high)
    decided = verdict(metric, change_low, change_high, tolerance)
    if (noise.source == DRIFT or load_differs) and decided in (WORSE, BETTER):
        decided = INCONCLUSIVE
    return found | {
        "difference": _number(difference),
        "low": _number(change_low),
        "high": _number(change_high),
        "verdict": decided,
        "detectable": _detectable(metric, tolerance, shift, low, high),
        "noise": noise.source,
        "runs_needed": runs_a_side(noise.spread, _margin(metric, tolerance)),
        "decide_runs": _decide_runs(metric, tolerance, shift, noise.spread) if decided == INCONCLUSIVE else None,
    }


def _unavailable() -> dict:
    return {"difference": None, "low": None, "high": None, "verdict": NOT_AVAILABLE}


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
        noises = {row.noise for row in comparison.rows if row.method == SECONDS}
        widened = (
            "the calibration's run-to-run spread (--noise, Student's t for its runs)"
            if CALIBRATED in noises
            else "the runs' own drift between their halves, a lower bound of run-to-run noise: beyond the tolerance "
            "it says inconclusive, never worse (a calibration, --noise FILE, or repeats decide)"
        )
        notes.append(
            f"interval (seconds): moving-block bootstrap over each side's whole seconds ({REPLICATES} replicates, "
            f"seed {SEED}, blocks of ceil(n^(1/3)) seconds, never across runs): percentiles of the merged exact HDR "
            "histograms of the drawn seconds, QPS and error rate from their counts; the runs' partial first and "
            f"last seconds are left out. Widened by run-to-run noise, which no run's own seconds show: {widened}."
        )
    if REPEATS in comparison.methods:
        notes.append(
            f"interval (repeats): the exact Mann-Whitney U interval ({level}) of the shift of the repeats' figures "
            "(Hodges-Lehmann: the median of the pairwise log ratios, pp for errors), as benchstat tests; each figure "
            f"is the median over the repeats. It needs {least_runs()} runs a side: with fewer a row is same, or "
            "inconclusive when every pair differs beyond the tolerance."
        )
    notes.append(
        "could have detected: the smallest difference the row would have called worse (the tolerance plus the "
        "interval's half-width on the bad side); runs a side: how many would find twice the tolerance worse 80 % of "
        "the time with this noise (normal approximation; a lower bound where the noise is the runs' own drift)."
    )
    return notes


def calibrate(side: Side, warmup: Warmup = None, series: str = SERVICE) -> dict:
    """The calibration document of ``side``'s runs (A/A runs of one setting): per request name, the spread of each
    metric's figure from run to run (`analysis.compare_noise`)."""
    if side.suite:
        raise AnalysisError(f"{side.spec}: calibrate runs, not a suite (give the runs' prefixes or a quoted glob)")
    runs = side.cells[""]
    if len(runs) < LEAST_CALIBRATION_RUNS:
        raise AnalysisError(
            f"calibrate: {len(runs)} run(s) given; give {LEAST_CALIBRATION_RUNS} or more of the same settings "
            "(6 or more make a tighter calibration), e.g. 'out/aa-*'"
        )
    notes: list[str] = []
    seconds = [_seconds(run, warmup, series, notes) for run in runs]
    names = _names(seconds)
    figures = {name: [name_figures(run.names[name]) for run in seconds] for name in names}
    lengths = [len(run.names[names[0]].seconds) if names else 0 for run in seconds]
    return calibration_document([run.label for run in runs], lengths, figures)
