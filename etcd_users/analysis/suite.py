"""A benchmark suite's table: mean ± sample standard deviation over the repeats, one row per combination of the
axes and request name, like the tables of the official etcd v2.2.0 benchmark page (average QPS and its stddev,
average P90 and its stddev, per setting).

The suite is the output directory of ``python -m etcd_users.suite run``: its ``suite.json`` (schema 1, see
suites/README.md; the keys read here are defined in `etcd_users.files`) names the combinations, their axis values
and each run's CSV prefix and status. Every run with status ``done`` is loaded and measured exactly as the
comparison table measures a run (`load_run`, `measure_run`, `comparison_table`: the tool's exact latency files when
present, Locust's CSV otherwise); runs that failed, were interrupted, have not run yet or whose files cannot be read
are left out and named in the notes.
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from etcd_users.analysis import client
from etcd_users.analysis.load import AnalysisError, Run, load_run
from etcd_users.analysis.measure import RunMeasurement, Warmup, measure_run, request_names
from etcd_users.analysis.report import html_page, inline_svg, markdown_notes, write_csv
from etcd_users.analysis.tables import LATENCY_COLUMNS, chart_rows, comparison_table
from etcd_users.files import (
    AGGREGATED,
    RUN_DONE,
    RUN_FAILED,
    RUN_PENDING,
    SUITE_COMBINATION_REQUIRED_KEYS,
    SUITE_FINISHED,
    SUITE_JSON,
    SUITE_REQUIRED_KEYS,
    SUITE_RUN_REQUIRED_KEYS,
    SUITE_SCHEMA_VERSION,
)
from etcd_users.settings.network import parse_peer_rtt

WRITER = "python -m etcd_users.suite run"
PEER_RTT_AXIS = "local-peer-rtt"  # an axis of round trips between members: P50 is charted against it
NO_SPREAD = "—"  # the stddev of a single repeat
REASON_CHARS = 240  # of a failed run's reason in the notes


@dataclass(frozen=True)
class Metric:
    key: str  # as given to --metrics
    column: str  # the comparison table's column, and the column of the mean
    spread: str  # the column of the standard deviation
    decimals: int  # in the Markdown and HTML tables
    csv_decimals: int  # means of microsecond values need one more digit than the values


METRICS = (
    Metric("qps", "QPS", "QPS ±", 1, 3),
    Metric("p50", "P50 (ms)", "P50 ±", 3, 4),
    Metric("p90", "P90 (ms)", "P90 ±", 3, 4),
    Metric("p99", "P99 (ms)", "P99 ±", 3, 4),
    Metric("p99.9", "P99.9 (ms)", "P99.9 ±", 3, 4),
    Metric("error", "error %", "error % ±", 2, 4),
)
METRIC_KEYS = [metric.key for metric in METRICS]


@dataclass
class SuiteTable:
    """A suite measured: the table of means and stddevs, every run's own figures, and what was left out."""

    document: dict
    directory: Path
    table: pd.DataFrame  # axis values, name, mean and ± of every metric, n, source
    runs: pd.DataFrame  # axis values, repeat, run, then the comparison table's columns
    notes: list[str] = field(default_factory=list)

    @property
    def axis_names(self) -> list[str]:
        return list(self.document["axis_names"])

    @property
    def first_axis(self) -> list[str]:
        """The parts of the first axis (a linked axis has several): the groups of the chart."""
        axes = self.document["axes"]
        return list(axes[0]["parts"]) if axes else []


def parse_metrics(value: str | None) -> list[Metric]:
    """The metrics named in ``value`` (comma-separated keys of `METRICS`), in the order given; all by default."""
    if not value:
        return list(METRICS)
    by_key = {metric.key: metric for metric in METRICS}
    wanted = [part.strip().lower() for part in value.split(",") if part.strip()]
    unknown = [key for key in wanted if key not in by_key]
    if unknown or not wanted:
        raise AnalysisError(f"--metrics: unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(METRIC_KEYS)}")
    return [by_key[key] for key in dict.fromkeys(wanted)]


def read_suite(directory: Path) -> tuple[Path, dict]:
    """The suite directory and its suite.json; `AnalysisError` when either is missing or of another format."""
    if directory.name == SUITE_JSON and directory.is_file():
        directory = directory.parent  # the file itself was given
    if not directory.exists():
        raise AnalysisError(f"suite directory {directory} does not exist")
    if not directory.is_dir():
        raise AnalysisError(f"{directory} is not a directory: give the --out directory of {WRITER}")
    path = directory / SUITE_JSON
    if not path.is_file():
        raise AnalysisError(f"no {SUITE_JSON} in {directory}: not an output directory of {WRITER}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnalysisError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict) or "schema" not in document:
        raise AnalysisError(f"{path} was not written by {WRITER}: no schema key")
    if document["schema"] != SUITE_SCHEMA_VERSION:
        raise AnalysisError(
            f"{path} has schema {document['schema']!r}; this analysis reads schema {SUITE_SCHEMA_VERSION}"
        )
    _require(path, document, SUITE_REQUIRED_KEYS, "")
    if not isinstance(document["combinations"], list) or not isinstance(document["axis_names"], list):
        raise AnalysisError(f"{path} was not written by {WRITER}: combinations and axis_names must be lists")
    for index, combination in enumerate(document["combinations"]):
        _require(path, combination, SUITE_COMBINATION_REQUIRED_KEYS, f"combinations[{index}].")
        if not isinstance(combination["values"], dict) or not isinstance(combination["runs"], list):
            raise AnalysisError(f"{path} was not written by {WRITER}: combinations[{index}] has no values or runs")
        for run_index, run in enumerate(combination["runs"]):
            _require(path, run, SUITE_RUN_REQUIRED_KEYS, f"combinations[{index}].runs[{run_index}].")
    return directory, document


def _require(path: Path, mapping: object, keys: tuple[str, ...], where: str) -> None:
    missing = [key for key in keys if key not in mapping] if isinstance(mapping, dict) else list(keys)
    if missing:
        raise AnalysisError(f"{path} was not written by {WRITER}: no {where}{missing[0]}")


def measure_suite(
    directory: Path, names: list[str] | None = None, warmup: Warmup = None, series: str = "service"
) -> SuiteTable:
    """Load and measure every completed run of the suite in ``directory`` and build its table."""
    directory, document = read_suite(directory)
    axis_names = list(document["axis_names"])
    notes: list[str] = []
    if document.get("state") not in (None, SUITE_FINISHED):
        notes.append(f"suite state: {document['state']} (suite.json written {document.get('updated', '?')}).")
    left_out: dict[str, list[str]] = {}
    frames = []
    statuses: Counter[str] = Counter()
    unnamed = 0  # combinations whose runs have none of the names asked for
    unreadable = ""  # the first reason a completed run could not be loaded
    for combination in document["combinations"]:
        label = combination["label"]
        measured = []
        for entry in combination["runs"]:
            status = str(entry["status"])
            statuses[status] += 1
            where = f"{label} rep {entry['repeat']}"
            if status != RUN_DONE:
                if status == RUN_FAILED:
                    notes.append(f"{where}: failed, left out ({_reason(entry.get('error'))}).")
                else:
                    left_out.setdefault(status, []).append(where)
                continue
            prefix = str(directory / entry["prefix"])
            try:
                run = load_run(prefix, entry["prefix"])
                measured.append((entry["repeat"], _measure(run, names, warmup, series, notes)))
            except AnalysisError as error:
                unreadable = unreadable or str(error)
                notes.append(f"{where}: left out ({error}).")
        if not measured:
            notes.append(f"{label}: no completed run, not in the table.")
            continue
        frame = _runs_frame(combination, axis_names, measured)
        if frame.empty:
            unnamed += 1
            notes.append(f"{label}: no requests named {', '.join(names or [])}.")
            continue
        frames.append(frame)
    for status, runs in left_out.items():
        what = "not run yet" if status == RUN_PENDING else status
        notes.append(f"{what}, left out: {', '.join(runs)}.")

    if not frames:
        if unnamed:
            raise AnalysisError(f"none of the suite's runs has requests named {', '.join(names)}")
        if unreadable:
            raise AnalysisError(f"none of the completed runs in {directory / SUITE_JSON} could be read: {unreadable}")
        counts = ", ".join(f"{count} {status}" for status, count in statuses.items()) or "no runs"
        raise AnalysisError(f"no completed run to analyse in {directory / SUITE_JSON} ({counts})")
    runs = pd.concat(frames, ignore_index=True)
    if warmup is not None:
        cut = "the warm-up the load shape recorded" if warmup == "auto" else f"the first {warmup:g} s"
        notes.insert(0, f"{cut} of each run cut before measuring.")
    return SuiteTable(document, directory, summary_table(runs, axis_names), runs, notes)


def _measure(run: Run, names: list[str] | None, warmup: Warmup, series: str, notes: list[str]) -> RunMeasurement:
    # Only the names this run has: with a user_class axis most names are absent from most runs, which is no news.
    available = request_names(run, series)
    wanted = [name for name in names if name in available or name == AGGREGATED] if names else None
    if wanted == []:
        return RunMeasurement(run, [], None, None, None, "")
    measured = measure_run(run, wanted, warmup, series)
    notes.extend(measured.notes)
    found = client.run_busiest(measured)
    if client.client_bound(found):
        notes.append(client.bound_note(run.label, found))
    return measured


def _runs_frame(combination: dict, axis_names: list[str], measured: list[tuple[int, RunMeasurement]]) -> pd.DataFrame:
    table = comparison_table([run for _, run in measured])
    # A column of None only (every request failed) would be object-typed and upset pandas' concat.
    for column in ("QPS", *LATENCY_COLUMNS, "error %"):
        table[column] = table[column].astype(float)
    repeats = {run.run.label: repeat for repeat, run in measured}
    values = combination["values"]
    front = {axis: [values.get(axis)] * len(table) for axis in axis_names}
    front["combination"] = [combination["id"]] * len(table)
    front["repeat"] = table["run"].map(repeats).astype("int64")
    return pd.concat([pd.DataFrame(front, index=table.index), table], axis=1)


def summary_table(runs: pd.DataFrame, axis_names: list[str]) -> pd.DataFrame:
    """Mean and sample standard deviation (ddof=1) over the repeats of each combination and request name.

    ``runs`` holds one row per run and name (the comparison table's columns, the axis values and a
    ``combination`` label); combinations keep their plan order, names their order in the runs.
    """
    rows = []
    for _, group in runs.groupby("combination", sort=False):
        for name, repeats in group.groupby("name", sort=False):
            row = {axis: repeats[axis].iloc[0] for axis in axis_names}
            row["name"] = name
            for metric in METRICS:
                values = repeats[metric.column].astype(float)
                row[metric.column] = values.mean()
                # A single value has no sample stddev: NaN, shown as a dash.
                row[metric.spread] = values.std(ddof=1) if values.notna().sum() > 1 else math.nan
            row["n"] = len(repeats)
            row["source"] = "+".join(dict.fromkeys(repeats["source"]))
            rows.append(row)
    columns = [*axis_names, "name", *(c for metric in METRICS for c in (metric.column, metric.spread)), "n", "source"]
    table = pd.DataFrame(rows, columns=columns)
    table["n"] = table["n"].astype("int64")
    return table


def _reason(error: object) -> str:
    """The runner's summary of a failure and the last line of the stderr tail it quotes (as ``      | line``)."""
    lines = [line.strip().lstrip("|").strip() for line in str(error or "").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "no reason recorded"
    reason = lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


# -- output ------------------------------------------------------------------------------------------------------


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "+".join(map(_setting, value))
    return "" if value is None else str(value)


def _number(value: float, decimals: int) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.{decimals}f}"


def display_table(suite: SuiteTable, metrics: list[Metric]) -> pd.DataFrame:
    """The table as text: one "mean ± sd" cell per metric (``± —`` with one repeat)."""
    table = suite.table
    shown = pd.DataFrame({axis: table[axis].map(_setting) for axis in suite.axis_names})
    shown["name"] = table["name"]
    for metric in metrics:
        cells = []
        for mean, spread in zip(table[metric.column], table[metric.spread], strict=True):
            if math.isnan(mean):
                cells.append("")
            else:
                deviation = _number(spread, metric.decimals) or NO_SPREAD
                cells.append(f"{_number(mean, metric.decimals)} ± {deviation}")
        shown[metric.column] = cells
    shown["n"] = table["n"].map(str)
    shown["source"] = table["source"]
    return shown


def _right_aligned(suite: SuiteTable, shown: pd.DataFrame) -> set[str]:
    numeric_axes = {axis for axis in suite.axis_names if pd.api.types.is_numeric_dtype(suite.table[axis])}
    return numeric_axes | {column for column in shown.columns if column not in (*suite.axis_names, "name", "source")}


def markdown(suite: SuiteTable, metrics: list[Metric]) -> str:
    """The table in GitHub-flavoured Markdown, numbers right-aligned."""
    shown = display_table(suite, metrics)
    right = _right_aligned(suite, shown)
    lines = [
        "| " + " | ".join(shown.columns) + " |",
        "|" + "|".join("---:" if column in right else "---" for column in shown.columns) + "|",
    ]
    for row in shown.itertuples(index=False):
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines)


def numeric_table(suite: SuiteTable, metrics: list[Metric]) -> pd.DataFrame:
    """The table with separate numeric columns for each mean and stddev, rounded for the CSV."""
    columns = [*suite.axis_names, "name"]
    table = suite.table[columns].copy()
    for metric in metrics:
        for column in (metric.column, metric.spread):
            table[column] = suite.table[column].astype(float).round(metric.csv_decimals)
    table["n"] = suite.table["n"]
    table["source"] = suite.table["source"]
    return table


def title(suite: SuiteTable) -> str:
    quick = " (quick)" if suite.document.get("quick") else ""
    return f"etcd benchmark suite {suite.document.get('name') or suite.directory.name}{quick}"


def settings_line(suite: SuiteTable) -> str:
    """What every combination shares: duration, repeats, fixed options, target."""
    document = suite.document
    parts = []
    if document.get("duration") is not None:
        parts.append(f"{document['duration']} s per run")
    if document.get("repeats") is not None:
        parts.append(f"{document['repeats']} repeat(s) per combination")
    fixed = document.get("fixed") or {}
    if fixed:
        parts.append("fixed " + ", ".join(f"{name}={_setting(value)}" for name, value in fixed.items()))
    parts.append(f"endpoints {document['endpoints']}" if document.get("endpoints") else "a fresh local etcd per run")
    axes = ", ".join(axis.get("name", "?") for axis in document["axes"]) or "none"
    return f"Axes: {axes}. Settings: {'; '.join(parts)}."


EXPLANATION = (
    "Each cell is the mean ± the sample standard deviation (n − 1) over the n completed repeats; one repeat has "
    "no deviation (—). Each run is measured as the comparison table measures it: QPS = requests / the run's "
    "measured duration; latencies in ms from the tool's HDR files (source exact) or Locust's CSV in whole "
    "milliseconds (source locust); error % = failures / requests."
)


def write_markdown(suite: SuiteTable, metrics: list[Metric], path: Path) -> None:
    description = suite.document.get("description")
    parts = [f"# {title(suite)}", description, settings_line(suite), EXPLANATION, markdown(suite, metrics)]
    parts.append(markdown_notes(suite.notes))
    path.write_text("\n\n".join(part for part in parts if part) + "\n", encoding="utf-8")


def html_table(suite: SuiteTable, metrics: list[Metric]) -> str:
    shown = display_table(suite, metrics)
    right = _right_aligned(suite, shown)
    head = "".join(f"<th>{html.escape(column)}</th>" for column in shown.columns)
    body = []
    for row in shown.itertuples(index=False):
        cells = []
        for column, cell in zip(shown.columns, row, strict=True):
            css = ' class="num"' if column in right else ""
            cells.append(f"<td{css}>{html.escape(str(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"


def write_html(suite: SuiteTable, metrics: list[Metric], charts: dict[str, Path], path: Path) -> None:
    """One self-contained page: the table, the notes and the chart inlined as SVG."""
    description = suite.document.get("description")
    body = [f"<h1>{html.escape(title(suite))}</h1>"]
    if description:
        body.append(f"<p>{html.escape(description)}</p>")
    body += [f"<p>{html.escape(settings_line(suite))}</p>", f"<p>{html.escape(EXPLANATION)}</p>"]
    body.append(html_table(suite, metrics))
    if suite.notes:
        body += ['<ul class="notes">', *(f"<li>{html.escape(note)}</li>" for note in suite.notes), "</ul>"]
    for caption, svg in charts.items():
        body += [f"<h2>{html.escape(caption)}</h2>", "<figure>", inline_svg(svg), "</figure>"]
    path.write_text(html_page(title(suite), body), encoding="utf-8")


def chart_frame(suite: SuiteTable) -> pd.DataFrame:
    """The rows of the bar chart: a group per setting of the first axis, a series per other setting and name."""
    rows = chart_rows(suite.table)
    first = suite.first_axis
    rest = [axis for axis in suite.axis_names if axis not in first]
    several_names = rows["name"].nunique() > 1

    def group(row: pd.Series) -> str:
        return " ".join(f"{axis}={_setting(row[axis])}" for axis in first) or "all"

    def series(row: pd.Series) -> str:
        parts = [f"{axis}={_setting(row[axis])}" for axis in rest]
        if several_names or not parts:
            parts.append(str(row["name"]))
        return " · ".join(parts)

    frame = rows[["QPS", "QPS ±", "P99 (ms)", "P99 ±"]].copy()
    frame.insert(0, "group", [group(row) for _, row in rows.iterrows()])
    frame.insert(1, "series", [series(row) for _, row in rows.iterrows()])
    return frame


def peer_rtt_frame(suite: SuiteTable) -> pd.DataFrame | None:
    """The points of the chart of P50 against the members' round trip (a ``local-peer-rtt`` axis): ``rtt_ms``,
    ``series`` (the other settings and the request name) and ``P50 (ms)``; None without that axis."""
    if PEER_RTT_AXIS not in suite.axis_names:
        return None
    rows = chart_rows(suite.table)
    rest = [axis for axis in suite.axis_names if axis != PEER_RTT_AXIS]

    def series(row: pd.Series) -> str:
        return " · ".join([*(f"{axis}={_setting(row[axis])}" for axis in rest), str(row["name"])])

    rtts = [parse_peer_rtt(PEER_RTT_AXIS, str(value)) for value in rows[PEER_RTT_AXIS]]
    return pd.DataFrame(
        {
            "rtt_ms": [rtt.rtt_ms if rtt else 0.0 for rtt in rtts],
            "series": [series(row) for _, row in rows.iterrows()],
            "P50 (ms)": rows["P50 (ms)"].to_numpy(),
        }
    )


def write_files(suite: SuiteTable, metrics: list[Metric], out: Path) -> list[str]:
    """suite.md, suite.csv, suite_runs.csv, suite.html, the bar chart, and with a local-peer-rtt axis the chart of P50
    against the round trip; returns the names written."""
    # matplotlib only when files are written
    from etcd_users.analysis.charts import peer_rtt_lines, suite_bars

    out.mkdir(parents=True, exist_ok=True)
    numeric_table(suite, metrics).to_csv(out / "suite.csv", index=False)
    write_csv(suite.runs.drop(columns="combination"), out / "suite_runs.csv")
    group_title = "+".join(suite.first_axis)
    written = suite_bars(chart_frame(suite), out / "suite_bars", group_title)
    bars_title = f"QPS and P99 per combination (mean ± sd over the repeats), by {group_title or 'combination'}"
    charts = {bars_title: written[1]}
    points = peer_rtt_frame(suite)
    if points is not None:
        lines = peer_rtt_lines(points, out / "suite_peer_rtt")
        charts["P50 against the round trip between members, beside one round trip per commit"] = lines[1]
        written += lines
    write_markdown(suite, metrics, out / "suite.md")
    write_html(suite, metrics, charts, out / "suite.html")
    return ["suite.md", "suite.csv", "suite_runs.csv", "suite.html", *(path.name for path in written)]
