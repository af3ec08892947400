"""Each member's db quota and history compaction: the flags etcd gets, and the few words the launchers log."""

from __future__ import annotations

from collections.abc import Sequence

# etcd compacts itself (periodic mode): every AUTO_COMPACTION_RETENTION it drops the history older than that. With
# a retention under an hour etcd compacts once per retention, at the revision of one retention ago, so the db holds at
# most about two retentions of history; bbolt reuses the freed pages. 10k puts/s of 1 KB values add about 20 MB/s of
# history: 5 s keeps the db near 0.2-0.3 GB however long the run (README, "The local etcd").
AUTO_COMPACTION_RETENTION = "5s"
# The local etcd's quota: above etcd's 2 GiB default, at etcd's recommended maximum, and never more than half the free
# disk of its data dir (the WAL and snapshots need room too): a full quota raises an alarm, a full disk crashes etcd.
QUOTA_BYTES = 8 * 1024**3
QUOTA_SHARE_OF_FREE_DISK = 0.5


def fitting_quota(free_disk_bytes: int) -> int:
    """``QUOTA_BYTES``, or half the free disk when that is less (whole MiB)."""
    bounded = min(QUOTA_BYTES, int(free_disk_bytes * QUOTA_SHARE_OF_FREE_DISK))
    return max(1024**2, bounded - bounded % 1024**2)


def space_args(extra_args: Sequence[str], quota_bytes: int | None, retention: str | None) -> list[str]:
    """The quota and auto-compaction flags, unless ``extra_args`` sets them itself."""
    args = []
    if quota_bytes and flag_value(extra_args, "--quota-backend-bytes") is None:
        args += ["--quota-backend-bytes", str(quota_bytes)]
    compaction_given = any(
        flag_value(extra_args, flag) is not None for flag in ("--auto-compaction-retention", "--auto-compaction-mode")
    )
    if retention and not compaction_given:
        args += ["--auto-compaction-mode", "periodic", "--auto-compaction-retention", retention]
    return args


def describe_space(extra_args: Sequence[str], quota_bytes: int | None, retention: str | None) -> str:
    """The quota and compaction the members run with, ``extra_args`` first, in a few words."""
    quota = flag_value(extra_args, "--quota-backend-bytes")
    quota_text = binary_size(int(quota) if quota and quota.isdigit() else quota_bytes or 0)
    return f"quota {quota_text}, {describe_compaction(extra_args, retention) or 'no auto-compaction'}"


def describe_compaction(extra_args: Sequence[str], retention: str | None) -> str | None:
    """The members' own compaction, ``extra_args`` first (``history compacted every 5s``); None without one."""
    given_retention = flag_value(extra_args, "--auto-compaction-retention")
    if given_retention is None and not flag_value(extra_args, "--auto-compaction-mode"):
        given_retention = retention
    if given_retention in (None, "", "0"):
        return None
    if (flag_value(extra_args, "--auto-compaction-mode") or "periodic") == "periodic":
        return f"history compacted every {given_retention}"
    return f"history compacted to the last {given_retention} revisions"


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of the last ``--flag VALUE``, ``--flag=VALUE`` (or one dash, as Go allows) in ``args``; else None."""
    value = None
    names = (flag, flag[1:])
    for index, arg in enumerate(args):
        name, equals, inline = arg.partition("=")
        if name in names:
            value = inline if equals else (args[index + 1] if index + 1 < len(args) else "")
    return value


def binary_size(size: float) -> str:
    """As the reports write sizes: 2147483648 -> 2.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
