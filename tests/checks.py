"""What the tests read from a run and check it against: its rows, failure labels, refusal line and latency log, and
hdrh's own one-value-at-a-time recording, the oracle of the fast HDR paths."""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from support import read_csv_rows

from etcd_users import hdr

# Locust 2.47 closes its CSV files at shutdown without stopping the greenlet that writes them (locustio/locust#3486),
# which then fails once if the exit lets it run; Locust's traceback, not this project's
_LOCUST_CSV_WRITER_RACE = re.compile(
    r"Traceback \(most recent call last\):\n(?:  .*\n)+ValueError: I/O operation on closed file\.\n"
    r".*StatsCSVFileWriter\.stats_writer.* failed with ValueError\n?"
)


def assert_no_traceback(output: str) -> None:
    """No traceback but Locust's own CSV writer race; a failure shows the traceback and what led to it."""
    cleaned = _LOCUST_CSV_WRITER_RACE.sub("", output)
    at = cleaned.find("Traceback")
    assert at < 0, cleaned[max(0, at - 1500) : at + 3000]


def stderr_lines(text: str) -> list[str]:
    """The lines of a ``python -m etcd_users.local`` stderr that are the tool's own.

    A package __init__ may have imported the command's module before runpy runs it as ``-m``, which makes runpy warn
    that the module was already imported; that warning is not ours to assert on.
    """
    return [line for line in text.splitlines() if line.strip() and not line.startswith("<frozen runpy>")]


def stats_rows(csv_prefix: Path | str) -> dict[str, dict[str, str]]:
    """``_stats.csv`` by request name, without the Aggregated row."""
    return {row["Name"]: row for row in read_csv_rows(f"{csv_prefix}_stats.csv") if row["Name"] != "Aggregated"}


def failure_labels(csv_prefix: Path | str) -> dict[str, int]:
    """Occurrences of each failure label in ``_failures.csv``."""
    labels: dict[str, int] = {}
    for row in read_csv_rows(f"{csv_prefix}_failures.csv"):
        labels[row["Error"]] = labels.get(row["Error"], 0) + int(row["Occurrences"])
    return labels


def history(csv_prefix: Path | str) -> list[tuple[int, int, int]]:
    """(unix time, total requests, total failures) of each Aggregated row of ``_stats_history.csv``."""
    return [
        (int(row["Timestamp"]), int(row["Total Request Count"]), int(row["Total Failure Count"]))
        for row in read_csv_rows(f"{csv_prefix}_stats_history.csv")
        if row["Name"] == "Aggregated"
    ]


def refusal_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused start prints; fails unless the process exited 2 with that line and nothing else.

    Locust's own log lines start with ``[timestamp]``; anything else on stderr (a traceback, a library's log
    line) is noise a user has to read past.
    """
    assert result.returncode == 2, f"exit code {result.returncode}\n{result.stderr[-3000:]}"
    assert_no_traceback(result.stdout + result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    unprefixed = [line for line in lines if not line.startswith("[")]
    assert len(unprefixed) == 1, result.stderr
    assert unprefixed[0].startswith("locust-etcd: error: "), result.stderr
    assert [line for line in lines if "error" in line.lower()] == unprefixed, result.stderr
    return unprefixed[0]


def assert_share(part: float, whole: float, share: float, what: object = "") -> None:
    """``part`` of ``whole`` random picks is about ``share`` of them: within five standard deviations of a binomial
    draw of ``whole`` picks (and one pick). The band comes from the run's own count: narrow for a fast machine's many
    requests, wide for a slow machine's few, never a guess at how many a machine does in its seconds."""
    assert whole > 0, what
    tolerance = 5 * math.sqrt(share * (1 - share) / whole) + 1 / whole
    assert abs(part / whole - share) <= tolerance, (what, part, whole, share, tolerance)


def recorded(values_us: Iterable[int]) -> HdrHistogram:
    """A histogram of whole microseconds recorded one at a time by hdrh's own ``record_value``."""
    histogram = hdr.new_histogram()
    for value in values_us:
        histogram.record_value(value)
    return histogram


def read_hlog(path: Path | str) -> list[tuple[float, str, HdrHistogram]]:
    """(absolute start second, tag, histogram) of every interval of a ``_latency.hlog``, in file order."""
    reader = HistogramLogReader(str(path), hdr.new_histogram())
    intervals = []
    try:
        while (interval := reader.get_next_interval_histogram()) is not None:
            intervals.append((interval.get_start_time_stamp() / 1000, interval.get_tag(), interval))
    finally:
        reader.close()
    return intervals
