"""What a benchmark suite is: a `Suite` of fixed options and `Axis` values, and the names a suite file may use.

The file format is described in ``suites/README.md``; `etcd_users.suite.loader` reads and checks a file into a
`Suite`, and raises `SuiteError` for a bad one.
"""

from dataclasses import dataclass
from pathlib import Path

from etcd_users.core.arguments import Option
from etcd_users.core.features import OPTIONS

# the packaged locustfile: the default works from an installed tool as from a clone
DEFAULT_LOCUSTFILE = Path(__file__).resolve().parents[1] / "locustfile.py"
# the ready suites' earlier names (the files are named after what they reproduce): refused, naming the new file
RENAMED = {
    "seed000.yaml": "single-vs-three-members.yaml",
    "seed001.yaml": "v2-benchmark-grid.yaml",
    "seed003.yaml": "tls-put-concurrency-ladder.yaml",
}

TOP_KEYS = (
    "name",
    "description",
    "repeats",
    "duration",
    "users",
    "spawn_rate",
    "user_class",
    "members",
    "processes",
    "endpoints",
    "etcd_args",
    "locustfile",
    "fixed",
    "axes",
    "compare",
    "quick",
)
COMPARE_KEYS = ("axis", "changed")
QUICK_KEYS = ("repeats", "duration", "users", "spawn_rate", "processes", "fixed", "axes")
# what an axis may vary besides the --etcd-* options
SETTING_AXES = ("user_class", "users", "members", "processes")
# options that have a top-level key of their own
RESERVED_OPTIONS = {
    "endpoints": "set the top-level key endpoints",
    "local-members": "set the top-level key members (or a members axis)",
}
OPTIONS_BY_NAME: dict[str, Option] = {option.flag.removeprefix("--etcd-"): option for option in OPTIONS}
# options of the local etcd a suite starts for each run (no endpoints): they make that cluster, not the Locust command
LOCAL_CLUSTER_OPTIONS = (
    "local-binary",
    "local-peer-rtt",
    "local-heartbeat",
    "local-election",
    "local-compaction-retention",
)


class SuiteError(ValueError):
    """A bad suite file or output directory, told in one line that names the key."""


@dataclass(frozen=True)
class Axis:
    """One axis: a name, or several joined by ``+`` whose values move together (a linked axis)."""

    parts: tuple[str, ...]  # canonical names: option names without --etcd-, or user_class / users / members / processes
    values: tuple[tuple, ...]  # one tuple per step, aligned with parts

    @property
    def name(self) -> str:
        return "+".join(self.parts)


@dataclass(frozen=True)
class Compare:
    """``compare:``: the runs of one value of an axis against those of its other, combination by combination, once
    every run is done (``python -m etcd_users.analysis compare DIR:AXIS=BASELINE DIR:AXIS=CANDIDATE``)."""

    axis: str  # an axis of one name and two values
    baseline: str  # its first value, as the combinations' labels write it
    candidate: str  # its second
    changed: tuple[str, ...]  # options or facts that differ on purpose (analysis compare --changed)


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    quick: bool
    repeats: int
    duration: int
    users: int | None
    spawn_rate: float | None
    user_class: tuple[str, ...] | None
    members: int
    processes: int  # Locust processes per run (--processes): more connections than one process can open
    endpoints: str
    etcd_args: tuple[str, ...]
    locustfile: Path
    fixed: dict[str, object]
    axes: tuple[Axis, ...]
    compare: Compare | None = None

    @property
    def axis_names(self) -> list[str]:
        """Every axis part, in order: the columns of the table."""
        return [part for axis in self.axes for part in axis.parts]


def canonical_name(name: str) -> str:
    """``key_size``, ``key-size`` and ``etcd-key-size`` all name ``--etcd-key-size``."""
    return name.replace("_", "-").removeprefix("etcd-")
