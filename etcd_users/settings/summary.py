"""The run's summary: ``PREFIX_summary.json`` is written with every ``--csv PREFIX``; the perfdash file on request."""

from dataclasses import dataclass

from etcd_users.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.settings.declare import OptionGroup, SettingsError, option


def _perfdash(flag: str, path: str) -> str:
    """A file path; whether its directory is writable is checked on the master at start-up."""
    if path and (path.endswith("/") or path.rstrip("/").rsplit("/", 1)[-1] in ("", ".", "..")):
        raise SettingsError(
            f"{flag}: {shown(path, SHOWN_PATH_CHARACTERS)} names a directory; give a file path such as "
            "out/perfdash.json"
        )
    return path


@dataclass(frozen=True, kw_only=True)
class SummarySettings(OptionGroup):
    TITLE = "etcd run summary"
    DESCRIPTION = "The run in one file (PREFIX_summary.json with --csv PREFIX) and in perfdash's format"

    perfdash: str = option(
        "--etcd-perfdash",
        "",
        "Also write the run's latency percentiles (P50, P90, P99 of each request name, in ms) to this file in "
        "perfdash's JSON (the format of Kubernetes' perf-tests and etcd's benchmark results) when the run ends. "
        "Empty: none.",
        parse=_perfdash,
    )
