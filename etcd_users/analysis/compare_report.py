"""The comparison's outputs: the printed table, compare.md (a pull-request comment or ``$GITHUB_STEP_SUMMARY``),
compare.csv, compare.json, a JUnit file (a testcase per row, a failure per ``worse``) and its section of report.html.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd

from etcd_users.analysis.compare import INCONCLUSIVE, SECONDS, WORSE, Comparison, Row, method_notes
from etcd_users.analysis.compare_noise import CALIBRATED, DRIFT
from etcd_users.analysis.report import (
    Section,
    html_table,
    insert_section,
    markdown_notes,
    markdown_table,
    notes_list,
    paragraphs,
)
from etcd_users.analysis.tolerance import tolerance_text

TITLE = "etcd before and after"
SCHEMA = 1
VALUE_DECIMALS = {"QPS": 1, "P50 (ms)": 3, "P99 (ms)": 3, "P99.9 (ms)": 3, "error %": 3}


def _value(row: Row, value: float | None) -> str:
    return "" if value is None else f"{value:.{VALUE_DECIMALS[row.metric.title]}f}"


def _change(row: Row, value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:+.1f}%" if row.metric.unit == "%" else f"{value:+.3f} pp"


def display_table(comparison: Comparison) -> pd.DataFrame:
    """The verdict table as text, the cell and level columns only when a side has them."""
    rows = []
    for row in comparison.rows:
        interval = f"[{_change(row, row.low)}, {_change(row, row.high)}]" if row.low is not None else ""
        rows.append(
            {
                "cell": row.cell,
                "level": row.level,
                "name": row.name,
                "metric": row.metric.title.replace(" (ms)", " ms"),
                "baseline": _value(row, row.baseline),
                "candidate": _value(row, row.candidate),
                "difference": _change(row, row.difference),
                "95% interval": interval,
                "tolerance": tolerance_text(row.metric, row.tolerance),
                "verdict": row.verdict.upper() if row.verdict == WORSE else row.verdict,
            }
        )
    table = pd.DataFrame(rows)
    for column in ("cell", "level"):
        if not table[column].astype(bool).any():
            table = table.drop(columns=column)
    return table


def sizes_note(comparison: Comparison) -> str:
    sizes = {(row.method, row.sizes) for row in comparison.rows}
    parts = [f"{method} {baseline} vs {candidate}" for method, (baseline, candidate) in sorted(sizes)]
    return "compared: " + "; ".join(parts) + " (baseline vs candidate)."


def all_notes(comparison: Comparison) -> list[str]:
    return [*method_notes(comparison), sizes_note(comparison), *comparison.notes]


def summary_line(comparison: Comparison) -> str:
    worse, inconclusive = comparison.worse, comparison.inconclusive
    if not worse and inconclusive:
        return inconclusive_line(comparison)
    if not worse:
        return f"No regression: {len(comparison.rows)} row(s) compared, none worse."
    named = ", ".join(f"{_where(row)} {row.metric.key}" for row in worse[:5]) + (" …" if len(worse) > 5 else "")
    return f"REGRESSION: {len(worse)} of {len(comparison.rows)} row(s) worse ({named})."


def inconclusive_line(comparison: Comparison) -> str:
    """Rows beyond the tolerance that the data cannot vouch for: one run on a side without a calibration, or too
    few repeats for the rank test; how many runs a side would decide."""
    rows = comparison.inconclusive
    one_run = any(row.method == SECONDS for row in rows)
    why = "one run a side" if one_run else f"{min(min(row.sizes) for row in rows)} runs a side"
    calibrated = any(row.method == SECONDS and row.noise == CALIBRATED for row in rows)
    if calibrated:
        why += " under different machine load (the calibration holds for the load it was made under)"
    named = ", ".join(f"{_where(row)} {row.metric.key}" for row in rows[:5]) + (" …" if len(rows) > 5 else "")
    needed = [row.decide_runs for row in rows if row.decide_runs is not None]
    bound = "at least " if any(row.noise == DRIFT for row in rows) else ""
    runs = f"; {bound}{max(needed)} runs a side would decide" if needed else ""
    calibrate = " (or one run a side with --noise FILE from python -m analysis calibrate)" if one_run else ""
    calibrate = "" if calibrated else calibrate
    return (
        f"inconclusive: {why}: {len(rows)} of {len(comparison.rows)} row(s) beyond the tolerance by more than the "
        f"noise these runs show ({named}), which cannot vouch for a verdict{runs}{calibrate}."
    )


def detection_lines(comparison: Comparison) -> list[str]:
    """One line per request name (level, combination): the smallest difference each metric could have detected and
    the runs a side that would find twice its tolerance worse."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in comparison.rows:
        groups.setdefault((row.cell, row.level, row.name), []).append(row)
    lines = []
    for rows in groups.values():
        detected = ", ".join(f"{row.metric.key} {_detected(row)}" for row in rows)
        needed = ", ".join(f"{row.metric.key} {row.runs_needed}" for row in rows if row.runs_needed is not None)
        bound = " (at least: the noise is the runs' own drift)" if any(row.noise == DRIFT for row in rows) else ""
        runs = f"; runs a side to find twice the tolerance worse: {needed}{bound}" if needed else ""
        lines.append(f"could have detected ({_where(rows[0])}, {_sizes(rows[0])}): {detected}{runs}.")
    return lines


def _detected(row: Row) -> str:
    if row.detectable is not None:
        return _change(row, row.detectable)
    if row.verdict in (INCONCLUSIVE, "same") and row.method != SECONDS:
        return "none (too few runs for a 95 % rank interval)"
    return "none"


def _sizes(row: Row) -> str:
    unit = "runs" if row.method != SECONDS else "seconds"
    return f"{row.sizes[0]} vs {row.sizes[1]} {unit}"


def _where(row: Row) -> str:
    return "/".join(part for part in (row.cell, row.level, row.name) if part)


def text(comparison: Comparison, unfair: list[str]) -> str:
    """What is printed: the unfair lines first, the table, the notes, the verdict line."""
    parts = ["\n".join(unfair)] if unfair else []
    parts += [markdown_table(display_table(comparison)), "\n".join(detection_lines(comparison) + comparison.per_second)]
    parts.append(markdown_notes(all_notes(comparison)))
    parts.append(summary_line(comparison))
    return "\n\n".join(parts)


def write_markdown(comparison: Comparison, unfair: list[str], path: Path) -> None:
    sides = f"Baseline `{comparison.baseline.spec}`, candidate `{comparison.candidate.spec}`."
    path.write_text(f"# {TITLE}\n\n{sides}\n\n{text(comparison, unfair)}\n", encoding="utf-8")


def numeric_rows(comparison: Comparison) -> list[dict]:
    return [
        {
            "cell": row.cell,
            "level": row.level,
            "name": row.name,
            "metric": row.metric.key,
            "unit": row.metric.unit,
            "baseline": row.baseline,
            "candidate": row.candidate,
            "difference": row.difference,
            "low": row.low,
            "high": row.high,
            "tolerance": row.tolerance,
            "verdict": row.verdict,
            "method": row.method,
            "baseline_n": row.sizes[0],
            "candidate_n": row.sizes[1],
            "detectable": row.detectable,
            "runs_needed": row.runs_needed,
            "noise": row.noise,
            "decide_runs": row.decide_runs,
        }
        for row in comparison.rows
    ]


def write_csv(comparison: Comparison, path: Path) -> None:
    pd.DataFrame(numeric_rows(comparison)).to_csv(path, index=False, float_format="%.6g")


def write_json(comparison: Comparison, unfair: list[str], exit_code: int, path: Path) -> None:
    document = {
        "schema": SCHEMA,
        "baseline": comparison.baseline.spec,
        "candidate": comparison.candidate.spec,
        "unfair": unfair,
        "rows": numeric_rows(comparison),
        "notes": all_notes(comparison),
        "worse": len(comparison.worse),
        "inconclusive": len(comparison.inconclusive),
        "detection": detection_lines(comparison),
        "per_second": comparison.per_second,
        "verdict": summary_line(comparison),
        "exit_code": exit_code,
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def write_junit(comparison: Comparison, path: Path) -> None:
    """A testsuite with a testcase per row; a ``worse`` row is a failure, an ``n/a`` row is skipped."""
    suite = ElementTree.Element(
        "testsuite", name="etcd compare", tests=str(len(comparison.rows)), failures=str(len(comparison.worse))
    )
    for row in comparison.rows:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=".".join(["compare", *(part for part in (row.cell, row.level) if part)]),
            name=f"{row.name} {row.metric.key}",
        )
        detail = (
            f"{row.metric.key}: baseline {_value(row, row.baseline)}, candidate {_value(row, row.candidate)}, "
            f"difference {_change(row, row.difference)} [{_change(row, row.low)}, {_change(row, row.high)}], "
            f"tolerance {tolerance_text(row.metric, row.tolerance)}"
        )
        if row.verdict == WORSE:
            ElementTree.SubElement(case, "failure", message=f"worse: {detail}", type="regression")
        elif row.verdict == INCONCLUSIVE:
            ElementTree.SubElement(case, "skipped", message=f"inconclusive: {detail}")
        elif row.verdict not in ("same", "better"):
            ElementTree.SubElement(case, "skipped", message=f"not measured: {detail}")
        else:
            ElementTree.SubElement(case, "system-out").text = f"{row.verdict}: {detail}"
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def comparison_section(comparison: Comparison, unfair: list[str]) -> Section:
    """The verdict line, the unfair lines, the table and its notes: what report.html shows first."""
    body = [*paragraphs([summary_line(comparison)], css="answer"), *(["<ul>"] if unfair else [])]
    body += [*(f"<li>{html.escape(line)}</li>" for line in unfair), *(["</ul>"] if unfair else [])]
    body += [html_table(display_table(comparison)), *paragraphs(detection_lines(comparison) + comparison.per_second)]
    body += notes_list(all_notes(comparison))
    return Section(TITLE, tuple(body), anchor="compare")


def write_report_section(comparison: Comparison, unfair: list[str], path: Path) -> None:
    """The comparison's section at the top of report.html (a page of its own when there is none yet)."""
    insert_section(path, comparison_section(comparison, unfair), TITLE)
