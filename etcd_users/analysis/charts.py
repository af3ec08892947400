"""Charts of a comparison, each written as PNG and SVG with matplotlib's Agg canvas (no display needed).

- QPS over time, per run and request name;
- P50 / P99 / P99.9 over time, one panel per request name;
- on the charts over time, a load shape's levels as alternating bands labelled with their target, and the windows of
  ``--etcd-disrupt`` as bands labelled with their item;
- grouped bars of QPS and P99 per run and request name, like the single-node vs cluster chart of the
  single node vs 3-node benchmark chapter;
- for a benchmark suite, grouped bars of the mean QPS and P99 over the repeats with stddev error bars;
- when a run has ``_etcd_metrics.csv``, the members over time: fsync P99, proposals committed per second, db size
  and RSS, with leader changes as vertical lines;
- for a load shape's run, per level: planned against achieved QPS, and P50 / P95 / P99 / P99.9 on a log axis, the
  failing levels marked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, Locator, MaxNLocator, NullFormatter

from etcd_users.analysis.client import CLIENT
from etcd_users.analysis.disruptions import load_windows
from etcd_users.analysis.levels import FAIL, RunLevels, latency_unit_ms, level_spans
from etcd_users.analysis.measure import RunMeasurement, run_start
from etcd_users.analysis.server import MB, interval_rates, leader_change_times, member_series
from etcd_users.analysis.tables import chart_rows
from etcd_users.files import AGGREGATED

# No creator/date metadata: the SVG is inlined in the HTML report, which must not name any URL.
_SVG_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}
COLORS = [f"C{i}" for i in range(10)]
_PERCENTILE_STYLES = {"p50": ("P50", ":"), "p99": ("P99", "-"), "p999": ("P99.9", "--")}


_LOG_STEPS = ((1, 2, 5), (1,), (1, 2, 3, 4, 5, 6, 7, 8, 9))
"""Mantissas of the ticks of a log axis, in order of preference: 1-2-5, then decades alone for a wide range, then every
digit for a range too narrow to hold two 1-2-5 ticks (and round linear steps for one narrower still)."""
MAX_LOG_TICKS = 10


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks of a log axis from ``low`` to ``high`` (both included), at 1-2-5 steps (0.5, 1, 2, 5, 10, 20, ...):
    decades alone (every few of them if need be) when 1-2-5 would crowd the axis, every digit when 1-2-5 leaves
    fewer than two, round linear steps (12, 14, 16) when even that does. Each tick is the float its printed decimal
    form reads as (0.2, not 2 * 0.1)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= 0:
        return []
    low, high = (max(low, 1e-300), high) if low <= high else (max(high, 1e-300), low)
    first, last = math.floor(math.log10(low)), math.floor(math.log10(high))

    def within(mantissas: tuple[int, ...], every: int = 1) -> list[float]:
        values = (float(f"{m}e{e}") for e in range(first, last + 1) if (e - first) % every == 0 for m in mantissas)
        return [v for v in values if low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]

    ticks = within(_LOG_STEPS[0])
    if len(ticks) > MAX_LOG_TICKS:
        every = math.ceil((last - first + 1) / MAX_LOG_TICKS)
        ticks = within(_LOG_STEPS[1], every)
    elif len(ticks) < 2:
        ticks = within(_LOG_STEPS[2])
    if len(ticks) < 2:
        linear = MaxNLocator(nbins=4, steps=[1, 2, 5, 10]).tick_values(low, high)
        ticks = [float(f"{v:.12g}") for v in linear if v > 0 and low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]
    return sorted(set(ticks))


def plain_number(value: float, _position: object = None) -> str:
    """A tick label as a person writes it: 0.05, 0.5, 1, 20, 1000 (no exponent, no trailing .0)."""
    if not math.isfinite(value):
        return ""
    return np.format_float_positional(float(f"{value:.12g}"), trim="-")


class _LogTicks(Locator):
    """``log_ticks`` over the axis's view."""

    def __call__(self) -> list[float]:
        low, high = self.axis.get_view_interval()
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        return log_ticks(vmin, vmax)


def log_ms_axis(axes) -> None:
    """Put the y axis on a log scale labelled in plain milliseconds at 1-2-5 steps, minor ticks unlabelled."""
    axes.set_yscale("log")
    axes.yaxis.set_major_locator(_LogTicks())
    axes.yaxis.set_major_formatter(FuncFormatter(plain_number))
    axes.yaxis.set_minor_formatter(NullFormatter())


def _save(figure: Figure, stem: Path) -> list[Path]:
    FigureCanvasAgg(figure)
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    figure.savefig(png, dpi=110)
    figure.savefig(svg, metadata=_SVG_METADATA)
    return [png, svg]


def _run_start(run: RunMeasurement) -> float:
    return run_start(run.run, run.timeline) or 0.0


def _plotted_names(run: RunMeasurement) -> list[str]:
    """The names to draw for one run: its measured names when the timeline has them, else the aggregate."""
    line = run.timeline
    names = [m.name for m in run.measurements if m.name != AGGREGATED]
    if line is None:
        return []
    if not line.per_name or not names:
        return [AGGREGATED]
    return names


def _steps(rows: pd.DataFrame, values: pd.Series, run_start: float) -> tuple[list[float], list[float]]:
    """Points drawing each interval's value flat from its start to its end (seconds since the run started)."""
    x = [*(rows["start"] - run_start), float(rows["end"].iloc[-1] - run_start)] if len(rows) else []
    y = [*values, float(values.iloc[-1])] if len(rows) else []
    return x, y


def _mark_cut(axes, run: RunMeasurement, color: str) -> None:
    if run.cut_s is not None:
        axes.axvline(run.cut_s - _run_start(run), color=color, linestyle=":", linewidth=1)


def _shade_disruptions(axes, run: RunMeasurement, color: str) -> None:
    """Each window of ``--etcd-disrupt`` as a band, labelled with its item."""
    start = _run_start(run)
    for window in load_windows(run.run.prefix) or ():
        began, ended = window.get("started_at"), window.get("finished_at")
        if began is None or ended is None:
            continue
        # at least a tenth of a second wide: a leader move of 50 ms is still seen
        axes.axvspan(began - start, max(ended, began + 0.1) - start, color=color, alpha=0.15, linewidth=0)
        axes.annotate(
            window.get("item", ""),
            (began - start, 1.0),
            xycoords=("data", "axes fraction"),
            fontsize=6,
            rotation=90,
            va="top",
            ha="right",
            color=color,
        )


LEVEL_BAND_ALPHAS = (0.05, 0.13)  # alternate, so that two levels side by side are told apart
LEVEL_BAND_GID = "level-band"


def _run_end(run: RunMeasurement) -> float | None:
    frame = run.timeline.frame if run.timeline is not None else None
    return float(frame["end"].max()) if frame is not None and len(frame) else None


def _shade_levels(axes, run: RunMeasurement, color: str, labelled: bool = True) -> None:
    """Each level of a load shape's run, from its entry to its end, as a band of alternating shade labelled with
    the level's name and target."""
    if run.run.shape is None:
        return
    start = _run_start(run)
    for position, span in enumerate(level_spans(run.run.shape, _run_end(run))):
        alpha = LEVEL_BAND_ALPHAS[position % len(LEVEL_BAND_ALPHAS)]
        band = axes.axvspan(span.start - start, span.end - start, color=color, alpha=alpha, linewidth=0)
        band.set_gid(f"{LEVEL_BAND_GID}-{position + 1}")
        band.set_label(f"_{span.label}")  # the name a test or a reader finds; kept out of the legend
        if labelled:
            axes.annotate(
                span.label,
                (span.start - start, 0.02),
                xycoords=("data", "axes fraction"),
                xytext=(2, 0),
                textcoords="offset points",
                fontsize=6,
                rotation=90,
                va="bottom",
                ha="left",
                color="dimgray",
            )


def _band_color(runs: list[RunMeasurement], index: int) -> str:
    """One run: gray bands under its colored lines; several: each run's bands in its color."""
    return "gray" if len(runs) == 1 else COLORS[index % len(COLORS)]


def qps_over_time(runs: list[RunMeasurement], stem: Path) -> list[Path]:
    return _save(qps_over_time_figure(runs), stem)


def qps_over_time_figure(runs: list[RunMeasurement]) -> Figure:
    """Requests per second over the run, one line per run and name; dotted verticals mark warm-up cuts, bands a load
    shape's levels."""
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for index, run in enumerate(runs):
        color = COLORS[index % len(COLORS)]
        for style, name in zip(("-", "--", "-.", ":"), _plotted_names(run), strict=False):
            rows = run.timeline.rows_for(name).sort_values("start")
            qps = rows["requests"] / (rows["end"] - rows["start"])
            axes.plot(
                *_steps(rows, qps, _run_start(run)),
                style,
                drawstyle="steps-post",
                color=color,
                label=f"{run.run.label} · {name}",
            )
        _mark_cut(axes, run, color)
        _shade_levels(axes, run, _band_color(runs, index))
    axes.set_title("QPS over time")
    axes.set_xlabel("seconds since start of run")
    axes.set_ylabel("requests / s")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(fontsize="small")
    return figure


def latency_over_time(runs: list[RunMeasurement], stem: Path) -> list[Path]:
    return _save(latency_over_time_figure(runs), stem)


def latency_over_time_figure(runs: list[RunMeasurement]) -> Figure:
    """P50 (dotted), P99 (solid) and P99.9 (dashed) over time, a panel per name, a color per run; a load shape's
    levels and the windows of ``--etcd-disrupt`` as shaded bands."""
    names = list(dict.fromkeys(name for run in runs for name in _plotted_names(run))) or [AGGREGATED]
    figure = Figure(figsize=(10, 3.2 * len(names)), layout="constrained")
    panels = figure.subplots(len(names), 1, squeeze=False, sharex=True)[:, 0]
    for axes, name in zip(panels, names, strict=True):
        for index, run in enumerate(runs):
            if name not in _plotted_names(run):
                continue
            color = COLORS[index % len(COLORS)]
            rows = run.timeline.rows_for(name).sort_values("start")
            for column, (label, style) in _PERCENTILE_STYLES.items():
                if column in rows and rows[column].notna().any():
                    steps = _steps(rows, rows[column], _run_start(run))
                    axes.plot(*steps, style, drawstyle="steps-post", color=color, label=f"{run.run.label} {label}")
            _mark_cut(axes, run, color)
            _shade_levels(axes, run, _band_color(runs, index))
            _shade_disruptions(axes, run, color)
        axes.set_title(f"{name}: latency over time ({_kinds(runs, name)})")
        axes.set_ylabel("ms")
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        if axes.lines:
            axes.legend(fontsize="small", ncol=3)
    panels[-1].set_xlabel("seconds since start of run")
    return figure


def comparison_bars(table: pd.DataFrame, stem: Path) -> list[Path]:
    """QPS and P99 side by side: a group per request name, a bar per run, values written on the bars."""
    rows = chart_rows(table)
    names = list(dict.fromkeys(rows["name"]))
    labels = list(dict.fromkeys(rows["run"]))
    figure = Figure(figsize=(max(8.0, 3.0 + 1.2 * len(names) * len(labels)), 4.8), layout="constrained")
    width = 0.8 / max(len(labels), 1)
    for position, (column, title) in enumerate((("QPS", "QPS (requests / s)"), ("P99 (ms)", "P99 latency (ms)"))):
        axes = figure.add_subplot(1, 2, position + 1)
        for index, label in enumerate(labels):
            values = [_value(rows, label, name, column) for name in names]
            offsets = [i + (index - (len(labels) - 1) / 2) * width for i in range(len(names))]
            bars = axes.bar(offsets, values, width, label=label, color=COLORS[index % len(COLORS)])
            decimals = 0 if column == "QPS" else 2
            axes.bar_label(bars, labels=[f"{v:,.{decimals}f}" if v == v else "" for v in values], fontsize=7)
        axes.set_xticks(range(len(names)), names, rotation=15 if len(names) > 3 else 0)
        axes.set_title(title)
        axes.grid(axis="y", alpha=0.3)
        axes.legend(fontsize="small")
    return _save(figure, stem)


SUITE_PANELS = (("QPS", "QPS ±", "QPS (requests / s), mean ± sd"), ("P99 (ms)", "P99 ±", "P99 latency (ms), mean ± sd"))


def suite_bars(rows: pd.DataFrame, stem: Path, group_title: str = "") -> list[Path]:
    """Mean QPS and P99 with a ± stddev error bar each: a group per ``group`` (a setting of the suite's first axis),
    a bar and color per ``series`` (the other settings), the mean written above each error bar."""
    groups = list(dict.fromkeys(rows["group"]))
    series = list(dict.fromkeys(rows["series"]))
    figure = Figure(figsize=(max(8.0, 3.0 + 1.0 * len(groups) * len(series)), 5.2), layout="constrained")
    width = 0.8 / max(len(series), 1)
    for position, (column, spread, title) in enumerate(SUITE_PANELS):
        axes = figure.add_subplot(1, 2, position + 1)
        tops = []
        for index, label in enumerate(series):
            means = [_cell(rows, group, label, column) for group in groups]
            # No error bar where there is no stddev (a single repeat).
            errors = [0.0 if value != value else value for value in (_cell(rows, g, label, spread) for g in groups)]
            offsets = [i + (index - (len(series) - 1) / 2) * width for i in range(len(groups))]
            color = COLORS[index % len(COLORS)]
            axes.bar(offsets, means, width, yerr=errors, capsize=3, label=label, color=color)
            decimals = 0 if column == "QPS" else 2
            for x, mean, error in zip(offsets, means, errors, strict=True):
                if mean == mean:
                    # Above the error bar, where the label cannot hide it.
                    axes.annotate(
                        f"{mean:,.{decimals}f}",
                        (x, mean + error),
                        xytext=(0, 2),
                        textcoords="offset points",
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
                    tops.append(mean + error)
        axes.set_xticks(range(len(groups)), groups, rotation=15 if len(groups) > 3 else 0)
        if group_title:
            axes.set_xlabel(group_title)
        axes.set_title(title)
        axes.set_ylim(0, max(tops, default=0) * 1.12 or 1)
        axes.grid(axis="y", alpha=0.3)
    # One legend for both panels, below them: the series are the same.
    handles, labels = figure.axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=min(len(series), 3), fontsize="small")
    return _save(figure, stem)


def peer_rtt_lines(points: pd.DataFrame, stem: Path) -> list[Path]:
    """P50 against the round trip between members, a line per ``series``, beside the line of one round trip (a put
    is committed once a follower has it: one round trip more than without distance)."""
    figure = Figure(figsize=(8.0, 5.2), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    for index, (label, rows) in enumerate(points.groupby("series", sort=False)):
        rows = rows.sort_values("rtt_ms")
        axes.plot(rows["rtt_ms"], rows["P50 (ms)"], marker="o", label=label, color=COLORS[index % len(COLORS)])
    top = float(points["rtt_ms"].max()) if len(points) else 0.0
    axes.plot([0.0, top], [0.0, top], linestyle="--", color="grey", label="one round trip per commit")
    axes.set_xlabel("round trip between members (ms)")
    axes.set_ylabel("P50 (ms)")
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    return _save(figure, stem)


def _cell(rows: pd.DataFrame, group: str, series: str, column: str) -> float:
    match = rows[(rows["group"] == group) & (rows["series"] == series)][column]
    return float(match.iloc[0]) if len(match) and pd.notna(match.iloc[0]) else float("nan")


# (what is drawn, title, y label, step: a value per interval since the previous poll rather than at the poll)
_SERVER_PANELS = (
    ("FsyncP99Ms", "WAL fsync P99 per poll interval", "ms", True),
    ("commits", "proposals committed per second", "proposals / s", True),
    ("DbSizeBytes", "db size", "MB", False),
    ("RssBytes", "RSS", "MB", False),
)
_MEMBER_STYLES = ("-", "--", "-.", ":")


def _member_label(member: str) -> str:
    return member.split("://", 1)[-1]


def server_metrics(runs: list[RunMeasurement], stem: Path) -> list[Path]:
    """A 2x2 grid of the members' own figures over time, a color per run and a line style per member; the member
    that led most of the run is marked in the legend, leader changes are dashed verticals, warm-up cuts dotted,
    restarts a cross on the RSS line, a load shape's levels bands. Polls a member did not answer leave gaps."""
    figure = Figure(figsize=(12, 7.5), layout="constrained")
    panels = figure.subplots(2, 2, sharex=True).flatten()
    changes_drawn = restarts_drawn = False
    for index, run in enumerate(runs):
        frame = run.run.etcd_metrics
        if frame is None or frame.empty:
            continue
        color = COLORS[index % len(COLORS)]
        start = run_start(run.run, run.timeline) or float(frame["Timestamp"].min())
        for style, member in zip(_MEMBER_STYLES * 3, member_series(frame), strict=False):
            rows = member.rows
            if rows.empty:
                continue
            # Polls the member did not answer break its lines instead of joining across the gap.
            polls = frame[frame["Member"] == member.member]
            values = {
                "FsyncP99Ms": rows["FsyncP99Ms"],
                "commits": interval_rates(rows, "ProposalsCommitted"),
                "DbSizeBytes": rows["DbSizeBytes"] / MB,
                "RssBytes": rows["RssBytes"] / MB,
            }
            leader = " (leader)" if rows["IsLeader"].mean() > 0.5 else ""
            label = f"{run.run.label} · {_member_label(member.member)}{leader}"
            x = polls["Timestamp"] - start
            for axes, (column, _, _, step) in zip(panels, _SERVER_PANELS, strict=True):
                y = values[column].reindex(polls.index)
                drawstyle = "steps-pre" if step else "default"
                axes.plot(x, y, style, drawstyle=drawstyle, color=color, label=label, linewidth=1.8 if leader else 1.2)
            # A restart explains a drop in RSS: mark it where it shows.
            restarted = rows[rows["restart"]]
            if len(restarted):
                panels[3].plot(restarted["Timestamp"] - start, restarted["RssBytes"] / MB, "x", color=color, ms=8)
                restarts_drawn = True
        for when in leader_change_times(member_series(frame)):
            for axes in panels:
                axes.axvline(when - start, color=color, linestyle="--", linewidth=0.8, alpha=0.7)
            changes_drawn = True
        for number, axes in enumerate(panels):
            _mark_cut(axes, run, color)
            _shade_levels(axes, run, _band_color(runs, index), labelled=number == 0)
    for axes, (_, title, unit, _) in zip(panels, _SERVER_PANELS, strict=True):
        axes.set_title(title)
        axes.set_ylabel(unit)
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
    for axes in panels[2:]:
        axes.set_xlabel("seconds since start of run")
    handles, labels = panels[0].get_legend_handles_labels()
    if changes_drawn:
        handles.append(Line2D([], [], color="gray", linestyle="--", linewidth=0.8))
        labels.append("leader change")
    if restarts_drawn:
        handles.append(Line2D([], [], color="gray", marker="x", linestyle=""))
        labels.append("member restarted")
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize="small")
    figure.suptitle("etcd members during the run")
    return _save(figure, stem)


_LEVEL_PERCENTILES = {
    "p50_ms": ("P50", ":"),
    "p95_ms": ("P95", "-."),
    "p99_ms": ("P99", "-"),
    "p999_ms": ("P99.9", "--"),
}


def _level_row(rows: list[dict]) -> dict:
    """The row a level is drawn by: all requests, or the one name shown."""
    return next((row for row in rows if row["name"] == AGGREGATED), rows[0] if rows else {})


def _cell_value(row: dict, column: str) -> float:
    value = row.get(column)
    return float("nan") if value is None or pd.isna(value) else float(value)


def level_chart(runs: list[RunLevels], stem: Path) -> list[Path]:
    """Per level of each run: planned (dashed, hollow) and achieved QPS above, the latency percentiles below on a log
    axis with the latency gates as horizontal lines; failing levels marked with a red X (and shaded for one run),
    client-bound levels with an orange triangle."""
    longest = max(runs, key=lambda run: len(run.levels))
    names = [level.window.name for level in longest.levels]
    figure = Figure(figsize=(max(8.0, 2.0 + 0.6 * len(names)), 7.5), layout="constrained")
    qps_axes, latency_axes = figure.subplots(2, 1, sharex=True)
    failed_marked = bound_marked = False
    for index, run in enumerate(runs):
        color = COLORS[index % len(COLORS)]
        x = list(range(len(run.levels)))
        rows = [_level_row(level.rows) for level in run.levels]
        planned = [float("nan") if level.window.qps is None else level.window.qps for level in run.levels]
        achieved = [_cell_value(row, "achieved_qps") for row in rows]
        prefix = f"{run.run} " if len(runs) > 1 else ""
        if any(value == value for value in planned):
            qps_axes.plot(x, planned, "--o", color=color, markerfacecolor="none", label=f"{prefix}planned")
        qps_axes.plot(x, achieved, "-o", color=color, label=f"{prefix}achieved")
        for number, (column, (label, style)) in enumerate(_LEVEL_PERCENTILES.items()):
            values = [_cell_value(row, column) for row in rows]
            if any(value == value and value > 0 for value in values):
                # one run: a color per percentile; several: a color per run, a line style per percentile
                shade = COLORS[number] if len(runs) == 1 else color
                latency_axes.plot(x, values, style, marker=".", color=shade, label=f"{prefix}{label}")
        failing = [position for position, level in enumerate(run.levels) if level.verdict == FAIL]
        if failing:
            label = "failing level" if not failed_marked else None
            qps_axes.plot(failing, [achieved[i] for i in failing], "X", color="red", markersize=10, label=label)
            worst = [_cell_value(rows[i], "p99_ms") for i in failing]
            latency_axes.plot(failing, worst, "X", color="red", markersize=10, label=label)
            failed_marked = True
            if len(runs) == 1:
                for position in failing:
                    for axes in (qps_axes, latency_axes):
                        axes.axvspan(position - 0.5, position + 0.5, color="red", alpha=0.08, linewidth=0)
        # the load generator ran out of CPU there: the level measured it, not etcd
        bound = [position for position, level in enumerate(run.levels) if level.bound == CLIENT]
        if bound:
            label = "client-bound level" if not bound_marked else None
            qps_axes.plot(
                bound, [achieved[i] for i in bound], "^", color="darkorange", markersize=12, markerfacecolor="none",
                label=label,
            )  # fmt: skip
            bound_marked = True
    gates = dict.fromkeys(gate for run in runs for gate in run.gates)
    for gate in gates:
        threshold = latency_unit_ms(gate)
        if threshold is not None and threshold > 0:
            latency_axes.axhline(threshold, color="red", linestyle=":", linewidth=1, label=f"gate {gate.text}")
    qps_axes.set_title("QPS per level: planned and achieved")
    qps_axes.set_ylabel("requests / s")
    qps_axes.set_ylim(bottom=0)
    latency_axes.set_title("latency per level, from the moment its users were all running to its end")
    latency_axes.set_ylabel("ms (log)")
    if latency_axes.lines:
        log_ms_axis(latency_axes)
    latency_axes.set_xticks(range(len(names)), names, rotation=30 if len(names) > 6 else 0)
    for axes in (qps_axes, latency_axes):
        axes.grid(alpha=0.3)
        if axes.lines:
            axes.legend(fontsize="small", ncol=3)
    return _save(figure, stem)


def write_charts(runs: list[RunMeasurement], table: pd.DataFrame, out_dir: Path) -> dict[str, Path]:
    """Write the charts as PNG and SVG into ``out_dir`` (the members' chart only when a run has their metrics);
    return each chart's caption and SVG path."""
    charts = {
        "QPS over time": qps_over_time(runs, out_dir / "qps_over_time"),
        "Latency over time": latency_over_time(runs, out_dir / "latency_over_time"),
        "QPS and P99 per run": comparison_bars(table, out_dir / "comparison_bars"),
    }
    if any(run.run.etcd_metrics is not None and not run.run.etcd_metrics.empty for run in runs):
        charts["etcd members over time"] = server_metrics(runs, out_dir / "server_metrics")
    return {caption: paths[1] for caption, paths in charts.items()}


def _value(rows: pd.DataFrame, run: str, name: str, column: str) -> float:
    match = rows[(rows["run"] == run) & (rows["name"] == name)][column]
    return float(match.iloc[0]) if len(match) and pd.notna(match.iloc[0]) else float("nan")


def _kinds(runs: list[RunMeasurement], name: str) -> str:
    kinds = {run.timeline.percentiles_kind for run in runs if run.timeline and name in _plotted_names(run)}
    return "; ".join(sorted(kinds)) or "no history"
