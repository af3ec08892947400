"""The watcher-only workload (``EtcdWatcherUser``): what its watchers watch, from when, and how fast they read.

The number of streams and of watchers per stream are the workload's ``--etcd-watch-streams`` and
``--etcd-watchers-per-stream``, shared with ``EtcdWatchUser``.
"""

from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, option, switch, zero_or_more

REVISION_LIMIT = 2**63 - 1  # etcd's revisions are int64


def _start_revision(flag: str, value: int) -> int:
    """0: from now; N > 0: from revision N; -N: N revisions before the current one."""
    if abs(value) > REVISION_LIMIT:
        raise SettingsError(f"{flag}: {shown(value)} is beyond etcd's 64-bit revisions; give e.g. -1000 or 1")
    return value


def _fraction(flag: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise SettingsError(
            f"{flag}: {shown(value)} is not a share of the streams; give a number from 0 to 1 such as 0.1"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class WatchSettings(OptionGroup):
    TITLE = "etcd watchers"
    DESCRIPTION = "What EtcdWatcherUser's watchers watch, from which revision, and how slowly some of them read"
    SLICE = "watch"

    keys: int = option(
        "--etcd-watch-keys",
        0,
        "Each watcher watches the first N keys of the key space as one range (0: the whole --etcd-prefix).",
        parse=zero_or_more,
    )
    prev_kv: bool = option(
        "--etcd-watch-prev-kv", False, "Ask etcd for each event's previous key-value (prev_kv).", parse=switch
    )
    start_rev: int = option(
        "--etcd-watch-start-rev",
        0,
        "Revision the watchers start from: 0 now, N revision N, -N that many revisions before the current one "
        "(history etcd has compacted cancels the watcher).",
        parse=_start_revision,
    )
    progress_notify: bool = option(
        "--etcd-watch-progress-notify",
        False,
        "Ask etcd for progress notifications (the current revision on idle watchers, about every 10 minutes).",
        parse=switch,
    )
    consume_delay: float = option(
        "--etcd-watch-consume-delay",
        0.0,
        "Seconds a slow stream spends on each event before it reads the next response, so that its watchers fall "
        "behind (0: read at once).",
        parse=zero_or_more,
    )
    slow_fraction: float = option(
        "--etcd-watch-slow-fraction",
        1.0,
        "Share of the watch streams that consume slowly with --etcd-watch-consume-delay (a stream's watchers share "
        "its reading).",
        parse=_fraction,
    )

    @classmethod
    def check_run(cls, settings) -> None:
        if settings.watch.keys > settings.key_space_size:
            raise SettingsError(
                f"--etcd-watch-keys: {shown(settings.watch.keys)} keys are more than the key space's "
                f"{settings.key_space_size} (--etcd-key-space-size); give at most that, or 0 for the whole prefix"
            )
