"""The end of a run in the terminal: the exact latency table after Locust's summary, then the files the run left.

Locust's summary rounds to whole milliseconds; this table has the exact percentiles of the HDR histograms in ms to
the microsecond, the figures of ``PREFIX_latency.csv``: count, failures, P50, P90, P99, P99.9 and max per request
name and series (``intended`` beside ``service`` for rate-driven users), the ``Aggregated`` row last. It goes
through ``locust.stats_logger`` as Locust's summary does (plain lines on stderr, ``--logfile``, the web UI's log),
before the SLA lines. ``table_lines`` and ``files_lines`` are pure; ``at_quit`` prints them on a master or single
process, with Locust's ``_stats.csv`` completed first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from etcd_users.features.latency import final_stats
from etcd_users.files import SUFFIXES
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import LatencyRow
from etcd_users.latency.table import table_lines
from etcd_users.members.breach_files import capture_file

_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

# the files of a run in the order a reader wants them: the exact latency, Locust's, the members', the clients', the
# summary of them all
FILE_ORDER = (
    *("latency", "latency_history", "hlog"),
    *("stats", "history", "failures", "exceptions"),
    *("etcd_metrics", "shape", "capacity", "client_cpu", "disruptions", "audit", "evidence", "evidence_html"),
    *("staleness", "skew", "tail"),
    "summary",
)


def run_files(prefix: str | None, extra: Sequence[str | None] = (), since: float = 0.0) -> list[str]:
    """The files of this run that exist: ``PREFIX_*`` of ``etcd_users.files`` in ``FILE_ORDER``, then ``extra``
    (Locust's HTML and JSON reports); a file not written since ``since`` (a previous run's) is left out."""
    paths = [prefix + SUFFIXES[kind] for kind in FILE_ORDER] if prefix else []
    paths += [path for path in extra if path]
    found = []
    for path in paths:
        try:
            if os.stat(path).st_mtime >= since:
                found.append(path)
        except OSError:
            continue
    return found


def files_lines(paths: Sequence[str]) -> list[str]:
    return ["Files written:", *(f"    {path}" for path in paths)] if paths else []


def print_summary(rows: Sequence[LatencyRow], paths: Sequence[str]) -> None:
    """The table and the files, after Locust's summary tables."""
    lines = table_lines(rows)
    if lines:
        lines.append("")
    for line in [*lines, *files_lines(paths)]:
        _console.info(line)
    if lines or paths:
        _console.info("")


def at_quit(environment, recorder: LatencyRecorder, junit_path: str | None, since: float) -> None:
    """After Locust's summary, on a master or single process: _stats.csv completed, the exact table, the files written
    since ``since`` (a file older than that is a previous run's)."""
    final_stats.at_quit(environment)
    options = environment.parsed_options
    json_file = getattr(options, "json_file", None)
    prefix = getattr(options, "csv_prefix", None)
    reports = (getattr(options, "html_file", None), f"{json_file}.json" if json_file else None)
    reports += (capture_file(prefix) if prefix else None, junit_path)  # the capture's directory: its files
    print_summary(recorder.snapshot(), run_files(prefix, reports, since=since))
