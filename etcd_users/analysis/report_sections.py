"""What report.html says, in which order: the answer to the run's question first, then the details and the charts.

- a load shape's run answers "up to which load did etcd hold?": the capacity sentence, one row per level with the
  level's own figures, and the chart per level; the whole run's averaged row comes later, labelled as such;
- any other run answers "what did it do?": the comparison table;
- after the answer, the audit's verdict, the disruptions' cost and the phases by etcd version when the run has them,
  the whole run (for a shape's run), every column per level, the errors, and the charts over time.

A verdict that answers another question (a comparison against a baseline) goes before all of these, as
``write_html``'s ``lead_sections``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from etcd_users.analysis.audit import FAILED
from etcd_users.analysis.disruptions import DECIMALS as DISRUPTION_DECIMALS
from etcd_users.analysis.disruptions import NOTES as DISRUPTION_NOTES
from etcd_users.analysis.levels import DISPLAY_DECIMALS as LEVEL_DECIMALS
from etcd_users.analysis.levels import RunLevels, sentences
from etcd_users.analysis.phases import DECIMALS as PHASE_DECIMALS
from etcd_users.analysis.phases import NOTES as PHASE_NOTES
from etcd_users.analysis.report import Section, figure_section, html_table, notes_list, paragraphs, table_section
from etcd_users.files import AGGREGATED

CAPACITY = "capacity"
COMPARISON = "comparison"
WHOLE_RUN = "whole-run"
LEVELS_IN_FULL = "levels-in-full"
AUDIT = "audit"
DISRUPTIONS = "disruptions"
PHASES = "phases"
ERRORS = "errors"

# the columns of the table that answers: what was offered, what etcd gave, and the verdict
LEAD_LEVEL_COLUMNS = (
    *("run", "level", "name", "planned_users", "planned_qps", "achieved_qps", "error_pct"),
    *("p50_ms", "p99_ms", "p999_ms", "max_ms", "top_errors", "bound", "verdict", "breaches"),
)
# left out of the table that answers when no row has a value
_OPTIONAL_COLUMNS = ("planned_qps", "top_errors", "bound", "breaches")
LEVEL_CHART_CAPTION = "QPS and latency per level"
WHOLE_RUN_INTRO = (
    "Every request of the run together: the levels and the ramps between them averaged into one row, the figure of "
    "no single level. The levels' own figures are in Capacity above."
)


def lead_level_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run and level: its all-requests row, or the row of each name shown when there is none."""
    has_all = table.groupby(["run", "level"], sort=False)["name"].transform(lambda names: (names == AGGREGATED).any())
    rows = table[(table["name"] == AGGREGATED) | ~has_all.astype(bool)]
    columns = [column for column in LEAD_LEVEL_COLUMNS if column in rows.columns]
    if rows["run"].nunique() == 1:
        columns.remove("run")
    blank = rows.isna() | rows.astype(str).isin(("", "None"))
    columns = [column for column in columns if column not in _OPTIONAL_COLUMNS or not blank[column].all()]
    return rows[columns].reset_index(drop=True)


def capacity_section(
    runs: Sequence[RunLevels],
    table: pd.DataFrame,
    chart: Path | None = None,
    lines: Sequence[str] = (),
) -> Section:
    """The capacity sentence of each run, ``lines`` that belong with it (advice, the breach's captures), a row per
    level and the chart per level."""
    body = [*paragraphs(sentences(list(runs)), "answer"), *paragraphs([line for line in lines if line])]
    body += ['<div class="wide">', html_table(lead_level_table(table), LEVEL_DECIMALS), "</div>"]
    body += notes_list(
        [
            "One row per level, measured from the moment its users were all running to its end (all requests when the "
            "run has several request names); every column and name in Per level, in full."
        ]
    )
    if chart is not None:
        body += [f"<h3>{LEVEL_CHART_CAPTION}</h3>", *figure_section(LEVEL_CHART_CAPTION, chart).body]
    return Section("Capacity", tuple(body), CAPACITY)


def audit_section(table: pd.DataFrame, lines: Sequence[str]) -> Section:
    failed = (table["audit"] == FAILED).any()
    body = [*paragraphs(lines[:1], "answer failed" if failed else "answer"), *paragraphs(lines[1:])]
    body += ['<div class="wide">', html_table(table), "</div>"]
    return Section("Audit", tuple(body), AUDIT)


def report_sections(
    comparison: pd.DataFrame,
    notes: Sequence[str],
    errors: pd.DataFrame,
    charts: dict[str, Path],
    *,
    advice: Sequence[str] = (),
    levels: Sequence[RunLevels] = (),
    level_table: pd.DataFrame | None = None,
    level_notes: Sequence[str] = (),
    level_chart: Path | None = None,
    captures: Sequence[str] = (),
    disruptions: pd.DataFrame | None = None,
    phases: pd.DataFrame | None = None,
    audit: tuple[pd.DataFrame, list[str]] | None = None,
) -> list[Section]:
    """The sections of report.html in their order (see the module's docstring)."""
    shape_run = bool(levels) and level_table is not None
    if shape_run:
        answer = [capacity_section(levels, level_table, level_chart, [*advice, *captures])]
        answer_notes = list(notes)
    else:
        answer = []
        answer_notes = [*notes, *advice]
    comparison_title, comparison_anchor = ("Whole run", WHOLE_RUN) if shape_run else ("Comparison", COMPARISON)
    whole = table_section(
        comparison_title,
        comparison,
        answer_notes,
        intro=[WHOLE_RUN_INTRO] if shape_run else [],
        anchor=comparison_anchor,
    )
    if not shape_run:
        answer.append(whole)
    near_top = []
    if audit is not None:
        near_top.append(audit_section(*audit))
    if disruptions is not None:
        near_top.append(
            table_section("Disruptions", disruptions, DISRUPTION_NOTES, DISRUPTION_DECIMALS, anchor=DISRUPTIONS)
        )
    if phases is not None:
        near_top.append(table_section("Phases by etcd version", phases, PHASE_NOTES, PHASE_DECIMALS, anchor=PHASES))
    details = []
    if shape_run:
        in_full = table_section("Per level, in full", level_table, level_notes, LEVEL_DECIMALS, anchor=LEVELS_IN_FULL)
        details += [whole, in_full]
    if len(errors):
        details.append(table_section("Errors", errors, anchor=ERRORS))
    else:
        details.append(Section("Errors", ("<p>No failures.</p>",), ERRORS))
    details += [figure_section(caption, svg) for caption, svg in charts.items()]
    return [*answer, *near_top, *details]
