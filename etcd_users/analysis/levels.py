"""Results per level of a load shape: up to which load etcd held the SLA, where it broke, and on what.

A run made with one of the shapes (``shapes/``) has ``PREFIX_shape.json``: the plan and, per level, when it was
entered (``started_at``), when its users were all running (``running_at``) and the failure labels Locust counted from
then to its end (``errors``). Each level is measured over its steady part:

- the window starts when the level's users are all running and ends with the level (its own ``ended_at``, else the
  next entered level's start, else the shape's ``ended_at``, else the run's last request). Records written before
  ``running_at`` existed get an estimate instead (entry + the time Locust's dispatcher takes for the change of users,
  `spawn_seconds`), said so in the notes. Warm-up levels are left out;
- only the whole seconds inside the window count (a second of the history is [T, T+1)): a second that began before
  the users were all running, or ended after the next level began, is in no level. Requests and failures are the
  sums of those seconds of ``PREFIX_latency_history.csv``; the percentiles come from the hlog intervals of the same
  seconds merged into one histogram per name (never averaged over seconds); achieved QPS = requests / seconds;
- without the exact files, Locust's ``PREFIX_stats_history.csv`` gives the counts (source ``locust``) and, with
  ``--csv-full-history``, its percentiles of the last 10 s at the level's last second (whole ms), which no latency
  gate is judged on.

Each level is judged by the gates (``--sla``, else the run's own ``--etcd-sla`` from the shape record) with
`etcd_users.judging.sla.evaluate` on the window's histograms and counts, and a QPS level also by its achieved QPS
against 95 % of planned. Capacity is the highest load (planned QPS, or users for closed-loop rungs) whose level passed
with every judged level of lower load passing; the first breach is the failing level of lowest load.

With ``PREFIX_client_cpu.csv`` (or the intended-time series) each level also says whether the load generator limited
it (``analysis.client``): ``client_cpu_pct`` is the busiest client process's CPU over the window, ``bound`` is
``client`` (client-bound), ``schedule`` (the users fell behind their schedule while etcd answered within the gates),
``server`` (failed with the clients' CPU to spare) or empty, and the verdict text says ``(client-bound)`` or
``(behind schedule)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pandas as pd
from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.analysis import client
from etcd_users.analysis.hlog import EDGE_S, inside, merge_windows
from etcd_users.analysis.load import AnalysisError, Run, error_label
from etcd_users.analysis.measure import EXACT, LOCUST, RunMeasurement, request_names
from etcd_users.analysis.server import MB, member_series
from etcd_users.analysis.timeseries import Timeline
from etcd_users.files import AGGREGATED, INTENDED, SERVICE, tag_text
from etcd_users.judging.level_verdicts import KEEP_UP  # the rule the live verdicts apply during the run
from etcd_users.judging.sla import Measurements, evaluate
from etcd_users.judging.sla_specs import LATENCY_UNITS, Gate, SlaError, parse_gates, request_gates

TOP_ERRORS = 3

PASS = "pass"
FAIL = "FAIL"
NOT_MEASURED = "not measured"
NOT_JUDGED = "not judged"

PERCENTILE_COLUMNS = {"p50_ms": 50.0, "p90_ms": 90.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}
# Locust's history columns for the same percentiles (its last 10 s, whole ms) and the maximum
_LOCUST_PERCENTILES = {"p50_ms": "50%", "p90_ms": "90%", "p95_ms": "95%", "p99_ms": "99%", "p999_ms": "99.9%"}
SERVER_COLUMNS = ("fsync_p99_ms", "rss_mb_per_min")
# the busiest client process's CPU and what limited the level (analysis.client)
CLIENT_COLUMNS = ("client_cpu_pct", "bound")
COLUMNS = (
    *("run", "level", "name", "planned_users", "planned_qps", "window_s", "achieved_qps"),
    *("requests", "failures", "error_pct", *PERCENTILE_COLUMNS, "max_ms", "top_errors"),
    *CLIENT_COLUMNS,
    *SERVER_COLUMNS,
    *("verdict", "breaches", "source"),
)
DISPLAY_DECIMALS = {
    **dict.fromkeys(("planned_qps", "achieved_qps", "window_s"), 1),
    "error_pct": 2,
    **dict.fromkeys((*PERCENTILE_COLUMNS, "max_ms", "fsync_p99_ms"), 3),
    "rss_mb_per_min": 2,
    "client_cpu_pct": 1,
}
CSV_DECIMALS = {**DISPLAY_DECIMALS, "achieved_qps": 3, "error_pct": 4, "rss_mb_per_min": 4}

WINDOW_NOTE = (
    "Each level is measured from the moment its users were all running (the shape's running_at, from Locust's "
    "spawning_complete) to its end (as recorded, else the next level's start, or the run's end), over the whole "
    "seconds inside that window (window_s): requests and failures from _latency_history.csv, percentiles from the "
    "hlog intervals of those seconds merged into one histogram (not averaged over seconds), achieved_qps = requests / "
    "window_s. Warm-up levels are left out."
)
KEEP_UP_NOTE = (
    f"A QPS level also fails when its achieved QPS is below {100 * KEEP_UP:g} % of planned: the load generator "
    "or the server could not keep up (planned_users x --etcd-user-rate is offered); with the client CPU recorded the "
    "breach and the bound column say which (client, schedule or server)."
)
ERRORS_NOTE = (
    "top_errors: the most frequent failure labels from the level's users all running to its end, as Locust counted "
    "them on the master (in distributed runs the workers report every 3 s, so labels can lag by that much)."
)
SERVER_NOTE = (
    "Server columns per level, from _etcd_metrics.csv: fsync_p99_ms = the worst WAL fsync P99 of any member over the "
    "poll intervals that end inside the level's window; rss_mb_per_min = RSS growth between the first and the last "
    "poll inside the window, per minute, the fastest-growing member (MB = 10^6 bytes); empty when the window holds "
    "too few polls (see --etcd-metrics-interval)."
)


@dataclass(frozen=True)
class LevelWindow:
    """One level of the shape record and the window it is measured over (unix seconds)."""

    number: int  # 1-based position in the plan
    name: str
    users: int
    qps: float | None  # planned; None for a closed-loop rung
    warmup: bool
    started_at: float | None
    start: float | None  # its users all running (or the warm-up cut or the run's first request, if later)
    end: float | None
    estimated: bool = False  # running_at estimated from the spawn rate: the record has none
    errors: tuple[dict, ...] | None = None
    missing: str = ""  # why the level has no window
    running_at: float | None = None  # as recorded (or estimated), before any cut

    @property
    def seconds(self) -> range:
        """The whole unix seconds [T, T+1) inside [start, end)."""
        if self.start is None or self.end is None:
            return range(0)
        first, stop = math.ceil(self.start - EDGE_S), math.floor(self.end + EDGE_S)
        return range(first, max(first, stop))

    @property
    def load(self) -> float:
        """What orders levels for capacity: the planned QPS, or the users of a closed-loop rung."""
        return self.qps if self.qps is not None else float(self.users)


def level_windows(
    shape: dict, run_end: float | None = None, cut_s: float | None = None, first_request: float | None = None
) -> list[LevelWindow]:
    """Every level of a shape record with its window; pure. ``run_end`` ends the last level of a run whose shape
    recorded no ``ended_at`` (an interrupted run); no window starts before ``cut_s`` (a warm-up cut) or before the
    run's ``first_request`` (users spawned are not sending yet while their ``on_start`` connects or fills the read
    key space)."""
    levels = shape.get("levels") or []
    ended_at = shape.get("ended_at")
    windows = []
    previous_users = 0
    for position, level in enumerate(levels):
        started = _number(level.get("started_at"))
        end = _level_end(levels, position, ended_at, run_end)
        users = int(level.get("users") or 0)
        estimated = "running_at" not in level
        if estimated:
            running = (
                None if started is None else started + spawn_seconds(users - previous_users, level.get("spawn_rate"))
            )
        else:
            running = _number(level["running_at"])
        if started is not None:
            previous_users = users
        start = running if running is None else max([running, *(t for t in (cut_s, first_request) if t is not None)])
        missing = ""
        if started is None:
            missing = "never entered (the shape's tick passed it by)"
        elif running is None:
            missing = "its users were never all running before it ended"
        elif end is None:
            missing = "no end recorded and no request to end it"
        errors = level.get("errors")
        window = LevelWindow(
            number=position + 1,
            name=str(level.get("name", position + 1)),
            users=users,
            qps=None if level.get("qps") is None else float(level["qps"]),
            warmup=bool(level.get("warmup")),
            started_at=started,
            start=None if missing else start,
            end=None if missing else end,
            estimated=estimated,
            errors=None if errors is None else tuple(errors),
            running_at=running,
        )
        if not missing and not len(window.seconds):
            missing = f"no whole second in its window (+{start - started:.1f} s to +{end - started:.1f} s into it)"
        windows.append(window if not missing else _without_window(window, missing))
    return windows


def _level_end(levels: list[dict], position: int, ended_at: object, run_end: float | None) -> float | None:
    """A level's own end, else the next entered level's start, else the shape's end, else ``run_end``."""
    level = levels[position]
    if level.get("ended_at") is not None:
        return _number(level["ended_at"])  # its own end: a searching shape may hold the load between levels
    later = [_number(other.get("started_at")) for other in levels[position + 1 :]]
    end = next((moment for moment in later if moment is not None), None)
    if end is None:
        end = _number(ended_at) if ended_at is not None else run_end
    return end


@dataclass(frozen=True)
class LevelSpan:
    """A level from its entry to its end (unix seconds), ramp included: what the charts over time shade."""

    name: str
    users: int
    qps: float | None
    warmup: bool
    start: float
    end: float

    @property
    def label(self) -> str:
        target = f"{self.qps:g} QPS" if self.qps is not None else f"{self.users} users"
        return f"{self.name} · {target}"


def level_spans(shape: dict, run_end: float | None = None) -> list[LevelSpan]:
    """Every entered level of a shape record with the span it held the load, warm-up included; pure. Levels never
    entered, or without an end (an interrupted run without ``run_end``), have none."""
    levels = shape.get("levels") or []
    spans = []
    for position, level in enumerate(levels):
        started = _number(level.get("started_at"))
        end = _level_end(levels, position, shape.get("ended_at"), run_end)
        if started is None or end is None or end <= started:
            continue
        qps = None if level.get("qps") is None else float(level["qps"])
        name = str(level.get("name", position + 1))
        spans.append(LevelSpan(name, int(level.get("users") or 0), qps, bool(level.get("warmup")), started, end))
    return spans


def spawn_seconds(change: int, spawn_rate: float | None) -> float:
    """How long Locust takes to add or remove ``change`` users at ``spawn_rate``: it dispatches batches of
    ``floor(rate)`` users (at least 1) every ``batch / rate`` seconds, the first at once, and waits after none."""
    if not spawn_rate or spawn_rate <= 0 or not change:
        return 0.0
    batch = max(1, math.floor(spawn_rate))
    return (math.ceil(abs(change) / batch) - 1) * batch / spawn_rate


def _without_window(window: LevelWindow, why: str) -> LevelWindow:
    return LevelWindow(**{**window.__dict__, "start": None, "end": None, "missing": why})


def _number(value: object) -> float | None:
    return None if value is None else float(value)


# -- judging --


@dataclass(frozen=True)
class Check:
    """One gate (or the keep-up rule) on one level: passed None when it could not be judged."""

    gate: str  # the gate's text, or the keep-up rule
    label: str  # what was measured, e.g. "put p99"
    measured: float | None
    shown: str  # the measured value as text, with its unit
    passed: bool | None

    @property
    def short(self) -> str:
        return f"{self.label} {self.shown}"


@dataclass
class LevelResult:
    window: LevelWindow
    duration_s: float
    rows: list[dict]
    checks: list[Check]
    verdict: str
    achieved_qps: float | None
    bound: str = ""  # analysis.client: CLIENT, SCHEDULE, SERVER or ""
    client_cpu_pct: float | None = None  # the busiest client process's mean CPU over the window, % of one core

    @property
    def failed(self) -> list[Check]:
        """The failed checks, those with a measured value first (a gate on a level without requests fails with
        nothing measured, where the keep-up rule says what happened)."""
        failed = [check for check in self.checks if check.passed is False]
        return sorted(failed, key=lambda check: check.measured is None)


@dataclass
class RunLevels:
    """The per-level results of one run, with its capacity and first breach."""

    run: str
    shape: str
    levels: list[LevelResult]
    gates: tuple[Gate, ...]
    gates_from: str
    capacity: LevelResult | None
    breach: LevelResult | None
    notes: list[str] = field(default_factory=list)
    server: bool = False
    client: bool = False  # the run has the client CPU or the intended series: the client columns say something

    @property
    def judged(self) -> bool:
        return any(level.verdict in (PASS, FAIL) for level in self.levels)

    @property
    def first_breach(self) -> Check | None:
        return self.breach.failed[0] if self.breach is not None else None

    def sentence(self) -> str:
        """One line: the capacity under the gates and the first breach."""
        if not self.judged:
            if not any(level.duration_s for level in self.levels):
                return "capacity: not judged (no level was measured)"
            return "capacity: not judged (no gates: give --sla GATES, or run the shape with --etcd-sla)"
        under = ",".join(gate.text for gate in self.gates)
        if any(level.window.qps is not None for level in self.levels):
            keep_up = f"achieved QPS >= {100 * KEEP_UP:g} % of planned"
            under = f"{under} and {keep_up}" if under else keep_up
        if self.capacity is None:
            lowest = self.breach.window.name if self.breach is not None else "?"
            capacity = f"capacity: none (the lowest judged level, {lowest}, failed) under {under}"
        else:
            capacity = f"capacity: {_load_text(self.capacity)} ({self.capacity.window.name}) under {under}"
            if self.capacity.bound == client.CLIENT:
                capacity += " (client-bound: a figure of the load generator, not etcd)"
        if self.breach is None:
            return f"{capacity}; no level breached"
        limited = _BREACH_BOUND.get(self.breach.bound, "")
        return f"{capacity}; first breach at {self.breach.window.name}: {self.first_breach.short}{limited}"

    def summary(self) -> dict:
        """The run's entry in ``levels.json`` (without its rows)."""
        capacity = self.capacity
        breach = self.first_breach
        return {
            "run": self.run,
            "shape": self.shape,
            "gates": [gate.text for gate in self.gates],
            "gates_from": self.gates_from,
            "capacity_qps": None if capacity is None else _capacity_qps(capacity),
            "capacity_level": None if capacity is None else capacity.window.name,
            "capacity_users": None if capacity is None else capacity.window.users,
            "first_breach": None
            if breach is None
            else {
                "level": self.breach.window.name,
                "planned_qps": self.breach.window.qps,
                "planned_users": self.breach.window.users,
                "gate": breach.gate,
                "measured": breach.measured,
                "shown": breach.short,
                "all": [check.short for check in self.breach.failed],
                "bound": self.breach.bound,
            },
            "client_bound_levels": [level.window.name for level in self.levels if level.bound == client.CLIENT],
            "summary": self.sentence(),
        }


_BREACH_BOUND = {
    client.CLIENT: " (client-bound: the load generator ran out of CPU, not etcd)",
    client.SCHEDULE: " (the users fell behind their schedule while etcd answered in time)",
}
# the verdict text of a row whose level the client limited
_VERDICT_BOUND = {client.CLIENT: " (client-bound)", client.SCHEDULE: " (behind schedule)"}


def _capacity_qps(level: LevelResult) -> float | None:
    return level.window.qps if level.window.qps is not None else level.achieved_qps


def _load_text(level: LevelResult) -> str:
    if level.window.qps is not None:
        return f"{level.window.qps:g} QPS"
    achieved = "" if level.achieved_qps is None else f", {level.achieved_qps:.0f} QPS achieved"
    return f"{level.window.users} users{achieved}"


def gates_for(run: Run, given: str | None) -> tuple[tuple[Gate, ...], str, list[str]]:
    """The gates levels are judged by: ``--sla`` when given (even empty), else the run's own ``--etcd-sla``."""
    if given is not None:
        return parse_sla(given), "--sla", []
    text = (run.shape or {}).get("sla")
    if not text:
        return (), "", []
    try:
        return request_gates(parse_gates(str(text))), "the run's --etcd-sla", []
    except SlaError as error:
        return (), "", [f"{run.label}: the shape record's gates cannot be read ({error}); levels not judged by them."]


def parse_sla(text: str) -> tuple[Gate, ...]:
    """``--sla``: the grammar of ``--etcd-sla``; a bad gate is an input error."""
    try:
        return request_gates(parse_gates(text))  # a level has no disruption window to judge
    except SlaError as error:
        raise AnalysisError(str(error).replace("--etcd-sla:", "--sla:", 1)) from None


def judge(
    window: LevelWindow, gates: tuple[Gate, ...], data: Measurements | None, achieved: float | None, exact: bool
) -> list[Check]:
    """The gates and the keep-up rule on one measured level. ``data`` None: no counts at all; without ``exact``
    histograms the latency gates are not judged."""
    checks = []
    for gate in gates:
        if gate.metric in ("percentile", "mean", "max") and not exact:
            checks.append(Check(gate.text, gate.label, None, "no exact histograms", None))
            continue
        if data is None:
            checks.append(Check(gate.text, gate.label, None, "no counts", None))
            continue
        result = evaluate(gate, data)
        shown = _shown(gate, result.measured, result.shown)
        checks.append(Check(gate.text, gate.label, result.measured, shown, result.passed))
    if window.qps is not None:
        label = f"achieved QPS >= {100 * KEEP_UP:g} % of planned {window.qps:g}"
        if achieved is None:
            checks.append(Check("keep-up", label, None, "no counts", None))
        else:
            share = 100.0 * achieved / window.qps if window.qps else 100.0
            shown = f"{achieved:.1f} QPS, {share:.1f} % of planned {window.qps:g}"
            checks.append(Check("keep-up", "achieved", achieved, shown, achieved >= KEEP_UP * window.qps))
    return checks


def _shown(gate: Gate, measured: float | None, fallback: str) -> str:
    if measured is None:
        return fallback
    if gate.metric in ("percentile", "mean", "max"):
        return f"{measured:.3g} {gate.unit}"
    if gate.metric == "errors":
        return f"{measured:.3f} %" if gate.unit == "%" else f"{measured:g} failures"
    return f"{measured:.1f} QPS"


def verdict(checks: list[Check]) -> str:
    if any(check.passed is False for check in checks):
        return FAIL
    if checks and all(check.passed for check in checks):
        return PASS
    return NOT_JUDGED


def capacity_and_breach(levels: list[LevelResult]) -> tuple[LevelResult | None, LevelResult | None]:
    """The highest-load passing level with every judged level of lower load passing, and the failing level of lowest
    load (ties: the earlier level). Levels not measured or not judged neither pass nor fail."""
    judged = sorted(
        (level for level in levels if level.verdict in (PASS, FAIL)),
        key=lambda level: (level.window.load, level.window.number),
    )
    capacity = None
    for level in judged:
        if level.verdict == FAIL:
            return capacity, level
        capacity = level
    return capacity, None


# -- measuring --


def measure_levels(
    measured: RunMeasurement,
    names: list[str] | None = None,
    series: str = SERVICE,
    sla: str | None = None,
) -> RunLevels | None:
    """The run's levels measured, judged and tabulated; None when the run has no shape record."""
    run = measured.run
    if run.shape is None:
        return None
    gates, gates_from, notes = gates_for(run, sla)
    line = measured.timeline
    first_request = _first_request(run, line)
    windows = level_windows(run.shape, _run_end(run, line), measured.cut_s, first_request)
    measured_windows = [window for window in windows if not window.warmup]
    available = request_names(run, series)
    if not available and line is not None:
        available = [name for name in dict.fromkeys(line.frame["name"]) if name != AGGREGATED]
    if names:
        shown = [name for name in names if name in available or name == AGGREGATED]
    else:
        shown = available + ([AGGREGATED] if len(available) > 1 else [])

    exact = run.hlog_path is not None
    with_window = [window for window in measured_windows if window.start is not None]
    if exact:
        merged = merge_windows(run.hlog_path, [(window.start, window.end) for window in with_window])
        histograms = {window.number: found for window, found in zip(with_window, merged, strict=True)}
    else:
        histograms = {}
    metrics = member_series(run.etcd_metrics) if run.etcd_metrics is not None else None

    results = []
    for window in measured_windows:
        per_name = _histograms_by_name(histograms.get(window.number), available, series) if exact else None
        by_series = {
            kind: _histograms_by_name(histograms.get(window.number), available, kind) if exact else {}
            for kind in (SERVICE, INTENDED)
        }
        results.append(_measure_level(run, window, line, available, shown, per_name, gates, metrics, by_series))
    capacity, breach = capacity_and_breach(results)
    levels = RunLevels(run.label, str(run.shape.get("shape", "")), results, gates, gates_from, capacity, breach)
    levels.server = metrics is not None
    levels.client = run.client_cpu is not None or (run.latency is not None and INTENDED in set(run.latency["Series"]))
    levels.notes = notes + _notes(run, windows, levels, line, exact)
    for window in measured_windows:
        if window.start is not None and window.start == first_request and window.running_at < first_request:
            levels.notes.append(
                f"{run.label}: level {window.name} measured from the run's first request, "
                f"{first_request - window.running_at:.1f} s after its users were all running (their on_start: "
                "connecting, filling the read key space)."
            )
    return levels


def _first_request(run: Run, line: Timeline | None) -> float | None:
    """The run's first request (``_latency.csv``'s First), else the start of the first interval with requests."""
    if run.latency is not None and "First" in run.latency.columns:
        first = run.latency["First"].min()
        if pd.notna(first):
            return float(first)
    if line is not None:
        active = line.frame[line.frame["requests"] > 0]
        if len(active):
            return float(active["start"].min())
    return None


def _run_end(run: Run, line: Timeline | None) -> float | None:
    if run.latency is not None and "Last" in run.latency.columns:
        last = run.latency["Last"].max()
        if pd.notna(last):
            return float(last)
    if line is not None and len(line.frame):
        return float(line.frame["end"].max())
    return None


def _histograms_by_name(merged, names: list[str], series: str) -> dict[str, HdrHistogram]:
    """Per request name, the window's histograms of ``series`` merged over request types."""
    by_name: dict[str, HdrHistogram] = {}
    for name in names:
        found = hdr.merge(
            histogram
            for key, histogram in (merged or {}).items()
            if key.series == series and key.name == tag_text(name) and key.name != AGGREGATED
        )
        if found is not None and found.get_total_count():
            by_name[name] = found
    return by_name


def _measure_level(
    run: Run,
    window: LevelWindow,
    line: Timeline | None,
    available: list[str],
    shown: list[str],
    histograms: dict[str, HdrHistogram] | None,
    gates: tuple[Gate, ...],
    metrics,
    by_series: dict[str, dict[str, HdrHistogram]] | None = None,
) -> LevelResult:
    exact = histograms is not None
    base = {"run": run.label, "level": window.name, "planned_users": window.users, "planned_qps": window.qps}
    empty = dict.fromkeys(COLUMNS[5:], None)
    if window.start is None or line is None:
        why = window.missing or "no history to count its requests"
        rows = [{**empty, **base, "name": name, "verdict": NOT_MEASURED} for name in shown]
        missing = window if window.missing else _without_window(window, why)
        return LevelResult(missing, 0.0, rows, [], NOT_MEASURED, None)

    inside_rows = line.frame[inside(line.frame["start"], line.frame["end"], window.start, window.end)]
    totals = _totals(inside_rows, line.per_name)
    duration = float(len(window.seconds)) if line.source == EXACT else float((totals["end"] - totals["start"]).sum())
    counts = {}
    if line.per_name:
        for name in available:
            mine = inside_rows[inside_rows["name"] == name]
            counts[name] = (int(mine["requests"].sum()), int(mine["failures"].sum()))
    total = (int(totals["requests"].sum()), int(totals["failures"].sum()))
    achieved = total[0] / duration if duration > 0 else None

    if line.per_name:
        data = Measurements(
            histograms=histograms or {},
            requests={name: count[0] for name, count in counts.items()},
            failures={name: count[1] for name, count in counts.items()},
            duration_s=duration,
        )
    elif all(gate.name is None for gate in gates):  # Locust's history without rows per name: all requests only
        data = Measurements({}, {"": total[0]}, {"": total[1]}, duration)
    else:
        data = None
    checks = judge(window, gates, data, achieved, exact)
    level_verdict = verdict(checks)
    found = client.busiest(run.client_cpu, window.seconds)
    service, intended = ((by_series or {}).get(kind) or {} for kind in (SERVICE, INTENDED))
    runaway = client.ran_away(_p99_ms(intended.values()), _p99_ms(service.values()))
    within = _service_within_gates(gates, data, service) if runaway else True
    level_bound = client.bound(found, runaway, within, level_verdict == FAIL)
    cpu_pct = None if found is None else found.cpu_pct
    if level_bound:
        said = client.why(level_bound, found)
        checks = [
            replace(check, shown=f"{check.shown}; {said}")
            if check.gate == "keep-up" and check.passed is False
            else check
            for check in checks
        ]
    breaches = "; ".join(check.short for check in checks if check.passed is False)
    unjudged = [check.short for check in checks if check.passed is None]
    if unjudged and level_verdict != FAIL:
        breaches = "not judged: " + "; ".join(unjudged)
    server = _server_cells(metrics, window) if metrics is not None else dict.fromkeys(SERVER_COLUMNS)

    rows = []
    for name in shown:
        requests, failures = total if name == AGGREGATED else counts.get(name, (None, None))
        row = {
            **empty,
            **base,
            "name": name,
            "window_s": duration,
            "achieved_qps": None if requests is None or duration <= 0 else requests / duration,
            "requests": requests,
            "failures": failures,
            "error_pct": 100.0 * failures / requests if requests else None,
            "top_errors": _top_errors(window.errors, name),
            "client_cpu_pct": cpu_pct,
            "bound": level_bound,
            **server,
            "verdict": level_verdict + _VERDICT_BOUND.get(level_bound, ""),
            "breaches": breaches,
            "source": EXACT if exact else LOCUST,
        }
        if exact:
            row.update(_exact_latencies(histograms, name))
        else:
            row.update(_locust_latencies(run, inside_rows, name, line.per_name))
        rows.append(row)
    return LevelResult(window, duration, rows, checks, level_verdict, achieved, level_bound, cpu_pct)


def _p99_ms(histograms) -> float | None:
    """The P99 of the histograms merged (all names), in ms; None without a successful request."""
    merged = hdr.merge(histograms)
    if merged is None or not merged.get_total_count():
        return None
    return hdr.percentiles_us(merged, [99.0])[0] / 1000.0


def _service_within_gates(gates: tuple[Gate, ...], data: Measurements | None, service: dict) -> bool:
    """Every latency gate passed on the service time (whatever series the level was judged on)."""
    latency_gates = [gate for gate in gates if gate.metric in ("percentile", "mean", "max")]
    if not latency_gates:
        return True
    if data is None:
        return False
    on_service = Measurements(service, data.requests, data.failures, data.duration_s)
    return all(evaluate(gate, on_service).passed is not False for gate in latency_gates)


def _totals(rows: pd.DataFrame, per_name: bool) -> pd.DataFrame:
    if not per_name:
        return rows[rows["name"] == AGGREGATED]
    names = rows[rows["name"] != AGGREGATED]
    return names.groupby(["start", "end"], as_index=False)[["requests", "failures"]].sum()


def _exact_latencies(histograms: dict[str, HdrHistogram], name: str) -> dict:
    if name == AGGREGATED:
        histogram = hdr.merge(histograms.values())
    else:
        histogram = histograms.get(name)
    if histogram is None or not histogram.get_total_count():
        return {}
    values = hdr.percentiles_us(histogram, PERCENTILE_COLUMNS.values())
    cells = {column: value / 1000.0 for column, value in zip(PERCENTILE_COLUMNS, values, strict=True)}
    cells["max_ms"] = histogram.get_max_value() / 1000.0
    return cells


def _locust_latencies(run: Run, inside_rows: pd.DataFrame, name: str, per_name: bool) -> dict:
    """Locust's last-10-s percentiles at the level's last interval in the window; only --csv-full-history has them."""
    history = run.history
    mine = inside_rows[inside_rows["name"] == name]
    if history is None or not per_name or mine.empty:
        return {}
    rows = history[(history["Name"] == name) & (history["Timestamp"] == mine["end"].max())]
    if rows.empty:
        return {}
    last = rows.iloc[-1]
    cells = {column: _float(last.get(source)) for column, source in _LOCUST_PERCENTILES.items()}
    cells["max_ms"] = _float(last.get("100%"))
    return cells


def _float(value: object) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float(value)


def _top_errors(errors: tuple[dict, ...] | None, name: str) -> str | None:
    if errors is None:
        return None
    counts: dict[str, int] = {}
    for entry in errors:
        if name == AGGREGATED or entry.get("name") == name:
            label = error_label(str(entry.get("error", "")))
            counts[label] = counts.get(label, 0) + int(entry.get("occurrences", 0))
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP_ERRORS]
    return "; ".join(f"{label} ×{count}" for label, count in top)


def _server_cells(series, window: LevelWindow) -> dict:
    """The worst member fsync P99 of the polls whose interval ends in the window, and the fastest RSS growth."""
    fsync, growth = [], []
    for member in series:
        rows = member.rows
        polls = rows[(rows["Timestamp"] > window.start) & (rows["Timestamp"] <= window.end)]
        fsync.extend(polls["FsyncP99Ms"].dropna())
        rss = polls.dropna(subset=["RssBytes"])
        if len(rss) > 1:
            seconds = float(rss["Timestamp"].iloc[-1] - rss["Timestamp"].iloc[0])
            if seconds > 0:
                growth.append(float(rss["RssBytes"].iloc[-1] - rss["RssBytes"].iloc[0]) / MB / seconds * 60.0)
    return {
        "fsync_p99_ms": max(fsync) if fsync else None,
        "rss_mb_per_min": max(growth) if growth else None,
    }


def _notes(run: Run, windows: list[LevelWindow], levels: RunLevels, line: Timeline | None, exact: bool) -> list[str]:
    label = run.label
    notes = []
    if levels.gates:
        notes.append(f"{label}: levels judged by {','.join(g.text for g in levels.gates)} ({levels.gates_from}).")
    warmups = [window.name for window in windows if window.warmup]
    if warmups:
        notes.append(f"{label}: warm-up level {', '.join(warmups)} left out.")
    estimated = [window.name for window in windows if window.estimated and not window.warmup]
    if estimated:
        notes.append(
            f"{label}: {run.path('shape').name} has no running_at (written by an older version): each window starts "
            "at the level's entry plus the time Locust takes to spawn the change of users at the level's spawn rate "
            "(batches of floor(rate) users a second, the first at once), an estimate."
        )
    for level in levels.levels:
        if level.verdict == NOT_MEASURED:
            notes.append(f"{label}: level {level.window.name} not measured: {level.window.missing or 'no history'}.")
    if line is not None and line.source != EXACT:
        notes.append(
            f"{label}: no {run.path('latency_history').name}: counts from Locust's {run.path('history').name} "
            "(source locust); its percentiles are of the last 10 s at the level's end, whole ms, and only with "
            "--csv-full-history; latency gates are not judged on them."
        )
    elif not exact:
        notes.append(f"{label}: no {run.path('hlog').name}: no percentiles per level; latency gates not judged.")
    if any(window.errors is None and window.start is not None for window in windows if not window.warmup):
        if run.failures is not None and len(run.failures):
            notes.append(
                f"{label}: no failure labels per level in {run.path('shape').name} (an older version, or a level "
                f"that never ended); see {run.path('failures').name} for the whole run's."
            )
    return notes


def table(runs: list[RunLevels]) -> pd.DataFrame:
    """All rows of all runs; the server columns only when some run has ``_etcd_metrics.csv``."""
    columns = [
        column
        for column in COLUMNS
        if (column not in SERVER_COLUMNS or any(run.server for run in runs))
        and (column not in CLIENT_COLUMNS or any(run.client for run in runs))
    ]
    rows = [row for run in runs for level in run.levels for row in level.rows]
    frame = pd.DataFrame(rows, columns=list(columns))
    for column in ("planned_users", "requests", "failures"):
        frame[column] = pd.array([pd.NA if pd.isna(value) else int(value) for value in frame[column]], dtype="Int64")
    for column in columns:
        if column in DISPLAY_DECIMALS:
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


def notes(runs: list[RunLevels]) -> list[str]:
    shared = [WINDOW_NOTE]
    if any(level.window.qps is not None for run in runs for level in run.levels):
        shared.append(KEEP_UP_NOTE)
    if any(row.get("top_errors") for run in runs for level in run.levels for row in level.rows):
        shared.append(ERRORS_NOTE)
    if any(run.client for run in runs):
        shared.append(client.LEVEL_NOTE)
    if any(run.server for run in runs):
        shared.append(SERVER_NOTE)
    return shared + [note for run in runs for note in run.notes]


def sentences(runs: list[RunLevels]) -> list[str]:
    """The closing line of each run (prefixed with the run's label when there are several)."""
    if len(runs) == 1:
        return [runs[0].sentence()]
    return [f"{run.run}: {run.sentence()}" for run in runs]


def advice(runs: list[RunLevels]) -> list[str]:
    """One line of advice when a level measured the load generator (client-bound, or behind its schedule)."""
    bounds = {level.bound for run in runs for level in run.levels}
    if client.CLIENT in bounds:
        return [client.ADVICE]
    if client.SCHEDULE in bounds:
        return [client.SCHEDULE_ADVICE]
    return []


def json_document(runs: list[RunLevels], frame: pd.DataFrame, all_notes: list[str]) -> dict:
    """``levels.json``: per run its capacity, first breach and rows; a single run's summary also at the top."""
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    document: dict = {"runs": []}
    for run in runs:
        entry = run.summary()
        entry["levels"] = [record for record in records if record["run"] == run.run]
        document["runs"].append(entry)
    if len(runs) == 1:
        summary = runs[0].summary()
        keys = ("capacity_qps", "capacity_level", "capacity_users", "first_breach", "client_bound_levels", "summary")
        for key in keys:
            document[key] = summary[key]
    document["notes"] = all_notes
    return document


def latency_unit_ms(gate: Gate) -> float | None:
    """A latency gate's threshold in ms (for the chart), None for other gates."""
    if gate.metric not in ("percentile", "mean", "max"):
        return None
    return gate.threshold * LATENCY_UNITS[gate.unit] / 1000.0
