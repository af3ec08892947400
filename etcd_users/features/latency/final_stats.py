"""Locust's CSV files completed at quit, so that ``PREFIX_stats.csv`` counts every request of the run.

Locust rewrites ``PREFIX_stats.csv`` (and ``_failures.csv``, ``_exceptions.csv``) once a second and appends a row to
``_stats_history.csv``, from a greenlet of its own, and writes nothing more at quit: the last second or so of a run,
and on a master the workers' last reports, never reach the files (305,574 puts in ``_stats.csv`` against 315,756 in
the terminal and in ``_latency.csv``). ``complete`` writes them once more when the run has quit and the last reports
are in, with the rows Locust's own ``StatsCSVFileWriter`` makes, after stopping that writer's greenlet: Locust closes
the files right after ``quit`` without stopping it, and a later tick would write again (or fail on a closed file).

When: on ``quit`` (``at_quit``), after Locust's summary, as late as can be. But ``--json`` and ``--json-file`` make
Locust clear its per-name figures as it prints them, between ``quitting`` and ``quit``: then on ``quitting``
(``at_quitting``), once the run has stopped and the last reports are in.
"""

from __future__ import annotations

from locust.stats import StatsCSVFileWriter

import gc
import logging
import time

import gevent

logger = logging.getLogger("etcd_users.reporting.final_stats")  # the name users' log filters know


def at_quitting(environment) -> bool:
    """On ``quitting``: ``complete`` if Locust is about to clear its per-name figures (``--json``, ``--json-file``)."""
    return complete(environment) if _clears_figures(environment.parsed_options) else False


def at_quit(environment) -> bool:
    """On ``quit``: ``complete``, unless ``at_quitting`` did (the figures are cleared by now)."""
    return False if _clears_figures(environment.parsed_options) else complete(environment)


def _clears_figures(options) -> bool:
    # Locust's print_stats_json and save_stats_json serialize with StatsEntry.get_stripped_report, which resets
    return bool(getattr(options, "json", False) or getattr(options, "json_file", None))


def complete(environment) -> bool:
    """Write the final rows of ``environment``'s CSV files (``--csv``); False when it has none."""
    if environment.parsed_options is not None and not getattr(environment.parsed_options, "csv_prefix", None):
        return False
    writer, greenlets = _writer_of(environment)
    if writer is None:
        return False
    for greenlet in greenlets:
        greenlet.kill(block=True, timeout=1.0)
    try:
        _rewrite(writer.requests_csv_filehandle, writer.requests_csv, writer.requests_csv_writer)
        _rewrite(writer.failures_csv_filehandle, writer.failures_csv, writer.failures_csv_writer)
        _rewrite(writer.exceptions_csv_filehandle, writer.exceptions_csv, writer.exceptions_csv_writer)
        history = writer.stats_history_csv_filehandle
        if history.tell() == 0:  # the writer never ran: the header first
            writer.stats_history_csv_writer.writerow(writer.stats_history_csv_columns)
        writer._stats_history_data_rows(writer.stats_history_csv_writer, time.time())
        history.flush()
    except (OSError, ValueError) as error:  # a full disk, a file closed already: the run's result stands
        logger.warning("could not complete %s_stats.csv: %s", writer.base_filepath, error)
        return False
    return True


def _rewrite(handle, write_all, csv_writer) -> None:
    """The whole file again, header and rows, as Locust's writer makes them."""
    handle.seek(0)
    handle.truncate()
    write_all(csv_writer)
    handle.flush()


def _writer_of(environment) -> tuple[StatsCSVFileWriter | None, list[gevent.Greenlet]]:
    """Locust's CSV writer of ``environment`` and the greenlet that runs it (Locust keeps both in ``main()``)."""
    web_ui = getattr(environment, "web_ui", None)
    writer = getattr(web_ui, "stats_csv_writer", None)
    candidates: list[gevent.Greenlet] = []
    for obj in gc.get_objects():
        if writer is None and isinstance(obj, StatsCSVFileWriter) and obj.environment is environment:
            writer = obj
        elif isinstance(obj, gevent.Greenlet) and not obj.dead:
            candidates.append(obj)
    if not isinstance(writer, StatsCSVFileWriter):
        return None, []
    greenlets = [each for each in candidates if getattr(getattr(each, "_run", None), "__self__", None) is writer]
    return writer, greenlets
