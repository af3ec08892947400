"""The run's result on the GitHub Actions job page: Markdown appended to ``$GITHUB_STEP_SUMMARY`` when it is set.

GitHub sets ``GITHUB_STEP_SUMMARY`` to a file per step and shows what the step appended to it on the run's summary
page. At the end of a run the master (or the single process) appends: a heading with the verdict, the exact latency
table of the end of the run (``etcd_users.latency.table.table_cells``: the figures of ``PREFIX_latency.csv``, in ms to
the microsecond), the ``--etcd-sla`` gates with their measured values, and a shape's per-level verdicts when its record
has them. Workers append nothing. ``markdown`` is pure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from etcd_users.files import AGGREGATED
from etcd_users.judging.sla import Result
from etcd_users.judging.sla_specs import Gate
from etcd_users.latency.store import LatencyRow
from etcd_users.latency.table import COLUMNS, TITLE, table_cells

logger = logging.getLogger("etcd_users.reporting.step_summary")  # the name users' log filters know

ENV_VAR = "GITHUB_STEP_SUMMARY"


def _cell(text: object) -> str:
    """A table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], right_from: int) -> list[str]:
    align = ["---" if index < right_from else "---:" for index in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return lines


def latency_lines(rows: Sequence[LatencyRow]) -> list[str]:
    """The end-of-run table in Markdown, the Aggregated row in bold; [] when no request was made."""
    if not any(row.count for row in rows):
        return []
    table = []
    for row, cells in table_cells(rows):
        name = f"**{row.name}**" if (row.type, row.name) == ("", AGGREGATED) else row.name
        table.append((row.type, name, row.series, *cells))
    return [f"{TITLE}:", "", *_table(("Type", "Name", "Series", *COLUMNS), table, right_from=3)]


def gate_lines(gates: Sequence[Gate], results: Sequence[Result], why_not_judged: str = "no run") -> list[str]:
    if not gates:
        return []
    table = []
    for gate in gates:
        judged = [result for result in results if result.gate == gate]
        if not judged:
            table.append((f"`{gate.text}`", f"not judged: {why_not_judged}", gate.limit, "skipped"))
        for result in judged:  # a disrupt: gate has a row per window
            name = f"`{gate.text}` {result.window}" if result.window else f"`{gate.text}`"
            table.append((name, result.shown, gate.limit, "✅ PASS" if result.passed else "❌ FAIL"))
    return ["SLA gates (`--etcd-sla`):", "", *_table(("Gate", "Measured", "Threshold", "Result"), table, right_from=9)]


def level_lines(levels: Sequence[dict]) -> list[str]:
    if not levels:
        return []
    table = []
    for level in levels:
        verdict = level.get("verdict")
        shown = "not judged" if verdict is None else ("❌ FAIL" if str(verdict).upper() == "FAIL" else "✅ pass")
        checks = "; ".join(str(check.get("line", "")) for check in level.get("checks") or [] if isinstance(check, dict))
        table.append((level.get("name", ""), shown, checks))
    return ["Levels of the shape:", "", *_table(("Level", "Verdict", "Checks"), table, right_from=9)]


def markdown(
    rows: Sequence[LatencyRow],
    gates: Sequence[Gate] = (),
    results: Sequence[Result] = (),
    levels: Sequence[dict] = (),
    why_not_judged: str = "no run",
) -> str:
    failed = {result.gate for result in results if not result.passed}  # a disrupt: gate fails on any window
    judged = {result.gate for result in results}
    if not gates:
        heading = "## locust-etcd"
    elif failed:
        heading = f"## locust-etcd: ❌ {len(failed)} of {len(gates)} SLA gates failed"
    elif len(judged) < len(gates):
        heading = f"## locust-etcd: {len(gates) - len(judged)} of {len(gates)} SLA gates not judged"
    else:
        heading = f"## locust-etcd: ✅ all {len(gates)} SLA gates passed"
    parts = [[heading], latency_lines(rows), gate_lines(gates, results, why_not_judged), level_lines(levels)]
    return "\n\n".join("\n".join(part) for part in parts if part) + "\n\n"


def append(text: str, path: str | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY`` (or ``path``); False when it is not set or cannot be written (logged)."""
    path = path or os.environ.get(ENV_VAR)
    if not path:
        return False
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(text)
    except OSError as error:
        logger.warning("could not append the run's summary to %s=%s: %s", ENV_VAR, path, error.strerror or error)
        return False
    return True
