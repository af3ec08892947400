"""What the members gave at a run's first breach: ``PREFIX_breach/capture.json`` (``--etcd-profile-on-breach``),
read back to list its files beside the first-breach sentence."""

from __future__ import annotations

import json
from pathlib import Path

from etcd_users.files import BREACH_CAPTURE, BREACH_DIRECTORY_SUFFIX


def capture_directory(prefix: str) -> Path:
    return Path(prefix + BREACH_DIRECTORY_SUFFIX)


def read_capture(prefix: str) -> dict | None:
    """``capture.json`` as the run wrote it; None when there is none or it cannot be read."""
    try:
        document = json.loads((capture_directory(prefix) / BREACH_CAPTURE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def capture_lines(prefix: str, label: str | None = None) -> list[str]:
    """A heading line (why, when, where) and one line per member: its files, or why there are none."""
    document = read_capture(prefix)
    if document is None:
        return []
    directory = capture_directory(prefix)
    when = document.get("started") or "?"
    state = "" if document.get("finished") else ", unfinished"
    heading = f"at the breach ({document.get('why') or '?'}; {when}{state}), the members' side in {directory}/:"
    lines = [f"{label}: {heading}" if label else heading]
    members = document.get("members")
    for name, result in members.items() if isinstance(members, dict) else ():
        result = result if isinstance(result, dict) else {}
        files = [str(path) for path in (result.get("files") or {}).values()]
        errors = result.get("errors") or {}
        missing = "; ".join(f"{kind}: {error}" for kind, error in errors.items())
        text = ", ".join(files) if files else "no files"
        lines.append(f"- {name}: {text}" + (f" (not captured: {missing})" if missing else ""))
    return lines
