"""The run's summary: ``PREFIX_summary.json`` is written with every ``--csv PREFIX``; the perfdash file on request."""

from dataclasses import dataclass

from etcd_users.core.declare import OptionGroup, option
from etcd_users.judging.sla_specs import parse_report_path


def _perfdash(flag: str, path: str) -> str:
    """Whether its directory is writable is checked on the master at start-up: a worker's file system is not the
    master's."""
    return parse_report_path(flag, path, "out/perfdash.json")


@dataclass(frozen=True, kw_only=True)
class SummarySettings(OptionGroup):
    TITLE = "etcd run summary"
    DESCRIPTION = "The run in one file (PREFIX_summary.json with --csv PREFIX) and in perfdash's format"
    SLICE = "summary"

    perfdash: str = option(
        "--etcd-perfdash",
        "",
        "Also write the run's latency percentiles (P50, P90, P99 of each request name, in ms) to this file in "
        "perfdash's JSON (the format of Kubernetes' perf-tests and etcd's benchmark results) when the run ends. "
        "Empty: none.",
        parse=_perfdash,
    )
