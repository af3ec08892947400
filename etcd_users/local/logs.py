"""What a member's log says when it fails: its most telling line, and its last lines."""

from __future__ import annotations

import json
from pathlib import Path

_LOG_TAIL_LINES = 15
_LOG_TAIL_LINE_CHARS = 400


def log_reason(path: Path) -> str:
    """The most telling line of a member log: the last error logged by zap, else the first plain line."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        return f"log unreadable: {error}"
    plain_lines = []
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip():
                plain_lines.append(line.strip())
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic"):
            return str(entry.get("error") or entry.get("msg"))[:_LOG_TAIL_LINE_CHARS]
    # Flag errors are printed before the logger exists, as the first plain line (followed by the usage text).
    return plain_lines[-1][:_LOG_TAIL_LINE_CHARS] if plain_lines else "no error in its log"


def log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError as error:
        return f"(log unreadable: {error})"
    return "\n".join(line[:_LOG_TAIL_LINE_CHARS] for line in lines) or "(log is empty)"


_ZAP_FRAME_KEYS = ("level", "ts", "caller", "msg", "stacktrace", "logger")


def log_size(path: Path) -> int:
    """Where the log ends now: a later start's lines come after it."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def start_reason(path: Path, offset: int) -> str:
    """Why a member stopped at its start: the last error zap logged after ``offset``, with its fields (etcd's figures,
    e.g. the versions of a refused downgrade), else the last plain line; the log is appended to at every start."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
    except OSError as error:
        return f"log unreadable: {error}"
    plain = ""
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            plain = plain or line.strip()
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic"):
            fields = ", ".join(f"{key}: {value}" for key, value in entry.items() if key not in _ZAP_FRAME_KEYS)
            reason = f"{entry.get('msg', '')} ({fields})" if fields else str(entry.get("msg", ""))
            return reason[:_LOG_TAIL_LINE_CHARS]
    return plain[:_LOG_TAIL_LINE_CHARS] or "no error in its log"
