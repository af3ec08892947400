"""The end-of-run audit of a run (``PREFIX_audit.json``, written by ``etcd_users.features.audit``) as a table row and
its verdict line: whether the members' HashKV agreed, acknowledged writes were lost, watch events kept etcd's
guarantees."""

from __future__ import annotations

import pandas as pd

from etcd_users.analysis.load import AnalysisError, Run, optional_json

COLUMNS = (
    *("run", "audit", "HashKV", "acknowledged writes", "lost", "gone after others' deletes"),
    *("watchers", "watch events in order", "missed", "repeated", "out of order", "split", "behind progress"),
)
PASSED = "pass"
FAILED = "FAILED"


def load_audit(run: Run) -> dict | None:
    """The audit's record; None when the run was not audited."""
    path = run.path("audit")
    document = optional_json(path)
    if document is None:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("passed"), bool) or "line" not in document:
        raise AnalysisError(
            f"{path} is not an audit record (no 'passed' and 'line'): was it written by the tool's audit?"
        )
    return document


def _hashkv(record: dict) -> str:
    hashes = record.get("hashkv") or {}
    members = len(hashes.get("members") or [])
    if not members:
        return f"not compared ({hashes.get('error') or 'no member'})"
    at = f"{members} member{'s' * (members > 1)} at rev {hashes.get('revision')}"
    if hashes.get("equal"):
        return f"equal, {at}"
    return f"DIFFER, {at}" if hashes.get("comparable") else f"not compared, {at}"


def _count(section: dict | None, key: str) -> int | None:
    value = (section or {}).get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def row(label: str, record: dict) -> dict:
    writes, watches = record.get("writes"), record.get("watches")
    return {
        "run": label,
        "audit": PASSED if record["passed"] else FAILED,
        "HashKV": _hashkv(record),
        "acknowledged writes": _count(writes, "acknowledged"),
        "lost": _count(writes, "lost"),
        "gone after others' deletes": _count(writes, "unexplained"),
        "watchers": _count(watches, "watchers"),
        "watch events in order": _count(watches, "in_order"),
        "missed": _count(watches, "missed"),
        "repeated": _count(watches, "repeated"),
        "out of order": _count(watches, "disordered"),
        "split": _count(watches, "split"),
        "behind progress": _count(watches, "ahead"),
    }


def measure(runs: list[Run]) -> tuple[pd.DataFrame, list[str]] | None:
    """A row per audited run and the runs' verdict lines (each followed by its evidence of a failure); None when no
    run was audited."""
    found = [(run.label, record) for run in runs if (record := load_audit(run)) is not None]
    if not found:
        return None
    table = pd.DataFrame([row(label, record) for label, record in found], columns=list(COLUMNS))
    for column in COLUMNS[3:]:
        table[column] = pd.array(table[column].tolist(), dtype="Int64")
    several = len(runs) > 1
    lines = []
    for label, record in found:
        for line in [str(record["line"]), *(str(error) for error in record.get("errors") or [])]:
            lines.append(f"{label}: {line}" if several else line)
    return table, lines
