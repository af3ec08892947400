"""How far behind each member's serializable reads were in a run (``PREFIX_staleness.csv``, written by the audit,
``etcd_users.features.audit.run``): a note line per run for the analysis' report."""

from __future__ import annotations

import csv

from etcd_users.analysis.load import Run
from etcd_users.files import STALENESS_COLUMNS


def staleness_note(run: Run) -> str | None:
    """``run: serializable reads behind the newest acknowledged write: 127.0.0.1:2379 P99 1.2 ms / 3 revisions (max
    …), …``; None without the file (no serializable read measured) or with a file of another shape."""
    path = run.path("staleness")
    if not path.is_file():
        return None
    try:
        with open(path, newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
        members = [
            f"{row['Member']} P99 {float(row['MsP99']):.3f} ms / {int(row['RevisionsP99'])} revisions "
            f"(max {float(row['MsMax']):.3f} ms / {int(row['RevisionsMax'])}, {int(row['Reads'])} reads)"
            for row in rows
            if all(column in row for column in STALENESS_COLUMNS)
        ]
    except (OSError, ValueError, TypeError):
        return None
    if not members:
        return None
    return f"{run.label}: serializable reads behind the newest write acknowledged when sent: " + "; ".join(members)
