"""The cost of each disruption of a run (``PREFIX_disruptions.json``), from the exact files: the per-second
histograms of ``PREFIX_latency.hlog`` and the per-second counts of ``PREFIX_latency_history.csv`` (service series),
measured by ``etcd_users.judging.disruption_cost`` as the run measured them live, but over every second the run wrote
(the live line may miss a master's last worker reports): the P99 before and the recovery. The span's own figures (the
gap to 10 ms, P99 and P99.9 of its 100 ms slots, requests and errors by label timed by their request) are the run's,
from the window's cost in the file: no file keeps data that fine. A run whose windows have none (``gap_ms``) is measured
in whole seconds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from etcd_users.analysis.hlog import intervals
from etcd_users.analysis.load import AnalysisError, Run, optional_json
from etcd_users.files import DISRUPTIONS_SCHEMA_VERSION, SERVICE, SUFFIXES, tag_text
from etcd_users.hdr import add
from etcd_users.judging.disruption_cost import RECOVERED_RATIO, Second, cost
from etcd_users.judging.disruption_span import TAIL_S
from etcd_users.members.member_figures import WINDOW_COUNTERS, window_counters

# what the members said over the window (PREFIX_etcd_metrics.csv), beside what the clients saw
MEMBER_COLUMNS = ("leader changes", "proposals failed")
COLUMNS = (
    *("run", "disruption", "members", "ok", "started (s)", "lasted (s)", "name", "gap (ms)", "gap (s)"),
    *("P99 before (ms)", "P99 during (ms)", "P99 x", "P99.9 before (ms)", "P99.9 during (ms)"),
    *("requests", "errors", "errors by label", "recovery (s)", *MEMBER_COLUMNS, "result"),
)


def load_windows(prefix: str) -> list[dict] | None:
    """The windows of ``PREFIX_disruptions.json``; None when the run had no disruptions."""
    path = Path(prefix + SUFFIXES["disruptions"])
    document = optional_json(path)
    if document is None:
        return None
    if not isinstance(document, dict) or document.get("schema") != DISRUPTIONS_SCHEMA_VERSION:
        raise AnalysisError(f"{path} is not a disruptions file of schema {DISRUPTIONS_SCHEMA_VERSION}")
    return [window for window in document.get("windows", []) if isinstance(window, dict)]


def per_second(run: Run) -> dict[str, dict[int, Second]]:
    """Each request name's seconds of the service series: counts from the history, histograms from the hlog."""
    history = run.latency_history
    if history is None or run.hlog_path is None:
        raise AnalysisError(
            f"{run.prefix}: the disruptions' cost needs {SUFFIXES['latency_history']} and "
            f"{SUFFIXES['hlog']} (the exact files of --csv)"
        )
    rows = history[history["Series"] == SERVICE]
    counts: dict[str, dict[int, list[int]]] = {}
    columns = (rows["Name"], rows["Timestamp"], rows["Requests"], rows["Failures"])
    for name, second, requests, failures in zip(*columns, strict=True):
        seconds = counts.setdefault(name, {})
        total = seconds.setdefault(int(second), [0, 0])  # a late report writes a second twice: add them
        total[0] += int(requests)
        total[1] += int(failures)
    histograms: dict[tuple[str, int], object] = {}
    for start_s, _end_s, key, histogram in intervals(run.hlog_path):
        if key.series == SERVICE:
            slot = (key.name, round(start_s))
            histograms[slot] = add(histograms.get(slot), histogram)
    data = {}
    for name, seconds in counts.items():
        data[name] = {
            second: Second(requests - failures, failures, histograms.get((tag_text(name), second)))
            for second, (requests, failures) in sorted(seconds.items())
        }
    return data


SPAN_FIGURES = ("gap_ms", "gap_s", "p99_ms", "p999_ms", "requests", "errors")


def _number(value) -> float:
    return math.nan if value is None else float(value)


def members_during(metrics: pd.DataFrame | None, started: float, finished: float) -> dict[str, float]:
    """The worst member's leader changes and failed proposals over a window (``window_counters``); NaN where no member
    has a scrape on each side."""
    found = dict.fromkeys(MEMBER_COLUMNS, math.nan)
    counted = window_counters(metrics.to_dict("records"), started, finished) if metrics is not None else None
    for column, name in zip(MEMBER_COLUMNS, WINDOW_COUNTERS, strict=True):
        if counted is not None:
            found[column] = _number(counted[name].value)
    return found


def measure(run: Run) -> pd.DataFrame | None:
    """One row per window and request name; None when the run had no disruptions."""
    windows = load_windows(run.prefix)
    if windows is None:
        return None
    data = per_second(run) if windows else {}
    first = min((s for seconds in data.values() for s in seconds), default=0)
    rows = []
    for window in windows:
        started, finished = window.get("started_at"), window.get("finished_at")
        if started is None or finished is None:
            continue  # still going when the run ended, without an end
        live = {entry.get("name"): entry for entry in window.get("cost", []) if isinstance(entry, dict)}
        members = members_during(run.etcd_metrics, started, finished)
        for name, seconds in sorted(data.items()):
            measured = cost(name, seconds, started, finished)
            spanned = live.get(name, {})
            labels = spanned.get("errors_by_label") or {}
            if spanned.get("gap_ms") is not None:  # the span's own figures, as the run measured them
                measured = measured._replace(**{key: spanned.get(key) for key in SPAN_FIGURES})
            rows.append(
                {
                    "run": run.label,
                    "disruption": window.get("item", window.get("action", "")),
                    "members": " ".join(window.get("members", [])),
                    "ok": "yes" if window.get("ok") else f"no: {window.get('error', '')}",
                    "started (s)": started - first,
                    "lasted (s)": finished - started,
                    "name": name,
                    "gap (ms)": _number(measured.gap_ms),
                    "gap (s)": measured.gap_s,
                    "P99 before (ms)": _number(measured.p99_before_ms),
                    "P99 during (ms)": _number(measured.p99_ms),
                    "P99 x": _number(measured.p99_ms) / _number(measured.p99_before_ms)
                    if measured.p99_before_ms
                    else math.nan,
                    "P99.9 before (ms)": _number(measured.p999_before_ms),
                    "P99.9 during (ms)": _number(measured.p999_ms),
                    "requests": measured.requests,
                    "errors": measured.errors,
                    "errors by label": ", ".join(f"{label} ×{count}" for label, count in sorted(labels.items())),
                    "recovery (s)": _number(measured.recovery_s),
                    **members,
                    "result": window.get("result", ""),
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


DECIMALS = {
    **{"started (s)": 1, "lasted (s)": 2, "gap (s)": 3, "P99 x": 2, "recovery (s)": 1},
    **{"leader changes": 0, "proposals failed": 0},
    **{column: 2 for column in COLUMNS if column.endswith("(ms)")},
}
NOTES = [
    "a window is its action's span: from its start to its end (whole seconds where the run kept no timeline); "
    "before: the 30 s ending where its first second begins",
    "gap: the longest silence without a successful response overlapping the span, from the last success before it to "
    "the first after, to 0.04 ms (a silence under 10 ms inside one 10 ms slot is unseen); gap (s) the same in seconds",
    f"P99/P99.9 during: the successes that ended from the span's start to {TAIL_S:g} s after its end, in 100 ms slots; "
    "requests and errors: those out at some time of it",
    f"recovery: from the action's end to the first second whose P99 is within {RECOVERED_RATIO:g}x of before "
    "(empty: none was)",
    "errors by label: the failures whose request was out during the span and its tail, by etcd's label",
    "leader changes, proposals failed: what the members' /metrics counted over the window (--etcd-metrics-interval), "
    "the worst member's, from each one's last scrape before the window to its first after it; empty without a scrape "
    "on each side",
]
