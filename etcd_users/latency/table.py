"""The exact latency table: the figures of ``PREFIX_latency.csv`` in ms to the microsecond, one row per request name
and series, the ``Aggregated`` row last (the end of the run prints it; the CI step summary writes it in Markdown).
Pure."""

from __future__ import annotations

from collections.abc import Sequence

from etcd_users.files import AGGREGATED, SERVICE
from etcd_users.latency.store import LatencyRow

# the HDR histograms' 3 significant digits: buckets 1 µs wide below 2.048 ms, 32 µs near 40 ms (etcd_users.hdr)
TITLE = (
    "Exact response times in ms (HDR histograms, 3 significant digits: to the µs below 2 ms; "
    "Locust's own tables round to whole ms)"
)
COLUMNS = ("# reqs", "# fails", "P50", "P90", "P99", "P99.9", "Max")
TYPE_WIDTH = 8  # at least, as Locust's tables
NUMBER_WIDTH = 10


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
