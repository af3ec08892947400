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
from etcd_users.features.monitoring import breach
from etcd_users.files import AGGREGATED, SERVICE, SUFFIXES
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import LatencyRow

_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

# the HDR histograms' 3 significant digits: buckets 1 µs wide below 2.048 ms, 32 µs near 40 ms (etcd_users.hdr)
TITLE = (
    "Exact response times in ms (HDR histograms, 3 significant digits: to the µs below 2 ms; "
    "Locust's own tables round to whole ms)"
)
COLUMNS = ("# reqs", "# fails", "P50", "P90", "P99", "P99.9", "Max")
TYPE_WIDTH = 8  # at least, as Locust's tables
NUMBER_WIDTH = 10
# the files of a run in the order a reader wants them: the exact latency, Locust's, the members', the clients', the
# summary of them all
FILE_ORDER = (
    *("latency", "latency_history", "hlog"),
    *("stats", "history", "failures", "exceptions"),
    *("etcd_metrics", "shape", "capacity", "client_cpu", "disruptions", "audit", "evidence", "evidence_html"),
    *("staleness", "skew", "tail"),
    "summary",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table_lines(rows: Sequence[LatencyRow]) -> list[str]:
    """The table, one line per row of ``LatencyRecorder.snapshot()``, the Aggregated row under a rule; [] when no
    request was made."""
    if not any(row.count for row in rows):
        return []
    type_width = max(TYPE_WIDTH, *(len(row.type) for row in rows))
    name_width = max(len("Name"), *(len(row.name) for row in rows))
    series_width = max(len("Series"), *(len(row.series) for row in rows))

    def line(type_: str, name: str, series: str, cells: Sequence[str]) -> str:
        numbers = "".join(f"{cell:>{NUMBER_WIDTH}}" for cell in cells)
        return f"{type_:<{type_width}} {name:<{name_width}}  {series:<{series_width}}{numbers}".rstrip()

    header = line("Type", "Name", "Series", COLUMNS)
    rule = "-" * len(header)
    lines = [TITLE, header, rule]
    for row, cells in table_cells(rows):
        if (row.type, row.name) == ("", AGGREGATED):
            lines.append(rule)
        lines.append(line(row.type, row.name, row.series, cells))
    return lines


def table_cells(rows: Sequence[LatencyRow]) -> list[tuple[LatencyRow, tuple[str, ...]]]:
    """The table's rows in order with their ``COLUMNS`` cells: each name's service time, then its intended latency;
    the Aggregated row last (also the Markdown table of ``step_summary``)."""
    order = sorted(
        rows, key=lambda row: ((row.type, row.name) == ("", AGGREGATED), row.type, row.name, row.series != SERVICE)
    )
    return [
        (row, (str(row.count), str(row.failures), *map(_ms, (row.p50, row.p90, row.p99, row.p999, row.max_ms))))
        for row in order
    ]


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
    reports += (breach.capture_file(prefix) if prefix else None, junit_path)  # the capture's directory: its files
    print_summary(recorder.snapshot(), run_files(prefix, reports, since=since))
