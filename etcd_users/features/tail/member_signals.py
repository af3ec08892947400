"""What a member's /metrics says about a slow second: the few families that explain one, read from its page and
compared scrape to scrape. Pure.

Counters and histogram counts only grow, so the difference between two scrapes says that something happened in
between: a leader change, a compaction, a defragmentation, a snapshot (raft's, a db sent to a follower, a client's
``Snapshot`` stream), a slow apply, a heartbeat that could not be sent, a proposal that failed. The WAL's fsync, the
backend's commit and the peers' round trips are durations: each interval's mean is kept (``Sample``) and judged at the
end against the member's own median over the run (``attribution.spikes``). Names differ a little between etcd
versions: each signal lists the names it is served under, and a member is read for those it serves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from etcd_users.features.tail.events import Event, clock
from etcd_users.members.server_metrics import interval_p99_ms

GRPC_STARTED = "grpc_server_started_total"
FSYNC = "etcd_disk_wal_fsync_duration_seconds"
COMMIT = "etcd_disk_backend_commit_duration_seconds"
PEER_RTT = "etcd_network_peer_round_trip_time_seconds"
IS_LEADER = "etcd_server_is_leader"
COMPACTED_KEYS = ("etcd_debugging_mvcc_db_compaction_keys_total", "etcd_mvcc_db_compaction_keys_total")


@dataclass(frozen=True)
class Counted:
    """A counter (or a histogram's ``_count``) whose growth is an event of ``cause``; ``seconds``: its ``_sum``
    in seconds (``scale`` converts a sum in ms), for the time the work took."""

    cause: str
    names: tuple[str, ...]  # the names a member may serve it under, newest first
    what: str  # one count, in words
    summed: bool = False  # a histogram: its _sum says how long it took
    scale: float = 1.0


COUNTED = (
    Counted("leader-change", ("etcd_server_leader_changes_seen_total",), "leader change seen"),
    Counted(
        "compaction",
        (
            "etcd_mvcc_db_compaction_total_duration_milliseconds",
            "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
        ),
        "compaction",
        summed=True,
        scale=0.001,
    ),
    Counted("defrag", ("etcd_disk_backend_defrag_duration_seconds",), "defragmentation", summed=True),
    Counted("snapshot", ("etcd_debugging_snap_save_total_duration_seconds",), "raft snapshot saved", summed=True),
    Counted("snapshot", ("etcd_snap_db_save_total_duration_seconds",), "db snapshot received", summed=True),
    Counted("snapshot", ("etcd_disk_backend_snapshot_duration_seconds",), "backend snapshot sent", summed=True),
    Counted("slow-apply", ("etcd_server_slow_apply_total",), "slow apply (over 100 ms)"),
    Counted("heartbeat-failure", ("etcd_server_heartbeat_send_failures_total",), "heartbeat send failure"),
    Counted("proposals-failed", ("etcd_server_proposals_failed_total",), "failed proposal"),
)
DURATIONS = {"fsync": FSYNC, "commit": COMMIT}
_SUMMED = tuple(
    f"{name}{suffix}"
    for counted in COUNTED
    if counted.summed
    for name in counted.names
    for suffix in ("_sum", "_count")
)
_PLAIN = tuple(name for counted in COUNTED if not counted.summed for name in counted.names)
_DURATION_LINES = tuple(f"{name}{suffix}" for name in (FSYNC, COMMIT) for suffix in ("_sum", "_count"))
# only these lines are parsed: a member's page has ~1,500 lines, a few dozen of them say what is read here
WANTED = (
    *_SUMMED,
    *_PLAIN,
    *COMPACTED_KEYS,
    *_DURATION_LINES,
    FSYNC + "_bucket",
    PEER_RTT + "_sum",
    PEER_RTT + "_count",
    IS_LEADER,
    GRPC_STARTED,
)


@dataclass
class Reading:
    """One scrape of one member, reduced to the signals."""

    at: float
    values: dict[str, float] = field(default_factory=dict)  # by line name, summed over labels
    fsync_buckets: dict[float, float] = field(default_factory=dict)
    peers: dict[str, tuple[float, float]] = field(default_factory=dict)  # peer ID -> (sum s, count)
    snapshot_streams: float = 0.0  # grpc_server_started_total{grpc_method="Snapshot"}


@dataclass(frozen=True)
class Sample:
    """One interval's mean of a duration on one member (``kind``: fsync, commit, peer-rtt)."""

    kind: str
    member: str
    since: float
    at: float
    mean_ms: float
    count: float
    p99_ms: float | None = None  # the fsync's, from its buckets (the precondition's figure)
    peer: str = ""  # the peer's ID, for a round trip


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of the page's wanted lines: a plain reader of etcd's text format for those few lines,
    ten times quicker than a full exposition parser (raises ValueError on a malformed one)."""
    for line in text.splitlines():
        if not line.startswith(WANTED):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, labels = head.partition("{")
        found = {key: _unescape(text) for key, text in _LABEL.findall(labels)} if brace else {}
        yield name, found, float(value)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(r"\\(.)", lambda match: "\n" if match.group(1) == "n" else match.group(1), text)


def read_page(text: str, at: float) -> Reading:
    """A /metrics page reduced to a ``Reading`` (raises ValueError on a malformed line)."""
    reading = Reading(at)
    for name, labels, value in samples(text):
        if name == GRPC_STARTED:
            if labels.get("grpc_method") == "Snapshot":
                reading.snapshot_streams += value
        elif name == FSYNC + "_bucket":
            bound = float(labels.get("le", "nan"))
            if not math.isnan(bound):
                reading.fsync_buckets[bound] = reading.fsync_buckets.get(bound, 0.0) + value
        elif name.startswith(PEER_RTT):
            peer = labels.get("To", "")
            total, count = reading.peers.get(peer, (0.0, 0.0))
            if name.endswith("_sum"):
                reading.peers[peer] = (total + value, count)
            elif name.endswith("_count"):
                reading.peers[peer] = (total, count + value)
        else:
            reading.values[name] = reading.values.get(name, 0.0) + value
    return reading


def _served(reading: Reading, names: tuple[str, ...], suffix: str = "") -> float | None:
    for name in names:
        value = reading.values.get(name + suffix)
        if value is not None:
            return value
    return None


def between(member: str, before: Reading, after: Reading) -> tuple[list[Event], list[Sample]]:
    """The events of ``member`` between two of its scrapes, and its durations' means over the interval. Counters that
    went back (the member restarted) say nothing of the interval."""
    window = f"between the scrapes at {clock(before.at)} and {clock(after.at)}"
    found: dict[str, list[str]] = {}
    sizes: dict[str, float] = {}
    for counted in COUNTED:
        suffix = "_count" if counted.summed else ""
        old, new = _served(before, counted.names, suffix), _served(after, counted.names, suffix)
        if old is None or new is None or new <= old:
            continue
        count = new - old
        words = f"{count:.0f} {counted.what}{'s' * (count != 1)}"
        size = count
        if counted.summed:
            took = (_served(after, counted.names, "_sum") or 0.0) - (_served(before, counted.names, "_sum") or 0.0)
            took *= counted.scale
            if took > 0:
                words += f" taking {took * 1000:.0f} ms"
                size = took
        found.setdefault(counted.cause, []).append(words)
        sizes[counted.cause] = sizes.get(counted.cause, 0.0) + size
    old_keys, new_keys = _served(before, COMPACTED_KEYS), _served(after, COMPACTED_KEYS)
    if old_keys is not None and new_keys is not None and new_keys > old_keys:
        found.setdefault("compaction", []).append(f"{new_keys - old_keys:.0f} keys compacted")
    was, now = before.values.get(IS_LEADER), after.values.get(IS_LEADER)
    if was is not None and now is not None and was != now:
        found.setdefault("leader-change", []).append("now the leader" if now else "no longer the leader")
    if after.snapshot_streams > before.snapshot_streams:
        streams = after.snapshot_streams - before.snapshot_streams
        found.setdefault("snapshot", []).append(
            f"{streams:.0f} Snapshot stream{'s' * (streams != 1)} started by a client"
        )
    events = [
        Event(after.at, cause, member, f"{', '.join(words)} ({window})", since=before.at, size=sizes.get(cause, 1.0))
        for cause, words in found.items()
    ]
    samples = []
    for kind, name in DURATIONS.items():
        count = after.values.get(name + "_count", 0.0) - before.values.get(name + "_count", 0.0)
        total = after.values.get(name + "_sum", 0.0) - before.values.get(name + "_sum", 0.0)
        if count > 0 and total >= 0:
            p99 = interval_p99_ms(after.fsync_buckets, before.fsync_buckets) if kind == "fsync" else None
            samples.append(Sample(kind, member, before.at, after.at, total / count * 1000.0, count, p99))
    for peer, (total_after, count_after) in after.peers.items():
        total_before, count_before = before.peers.get(peer, (0.0, 0.0))
        count, total = count_after - count_before, total_after - total_before
        if count > 0 and total >= 0:
            samples.append(Sample("peer-rtt", member, before.at, after.at, total / count * 1000.0, count, peer=peer))
    return events, samples
