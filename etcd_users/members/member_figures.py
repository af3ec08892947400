"""The members' own figures over a span of time, worst member first: what ``member:`` gates judge and the summary shows.

From the rows of ``PREFIX_etcd_metrics.csv`` (as read back from the file, or as the poller keeps them during the
run), each member's rows inside the span ``[start, end]`` give:

- ``fsync_p99_ms``, ``commit_p99_ms``, ``peer_rtt_p99_ms``, ``snapshot_save_p99_ms``: the P99 over the whole span,
  from the difference of the histogram's cumulative buckets between the span's first and last scrape
  (``histogram_quantile`` of the samples in between, as Prometheus computes it over a range) rather than the worst
  of the per-interval P99s, which over-weights a short interval with few samples. Peer round trips: the worst peer.
  Files without the bucket columns (older ones) fall back to the highest per-interval P99 of the span;
- ``slow_applies``, ``leader_changes``: the counters' increase from the first scrape to the last;
- ``db_growth_bytes``: the db's size at the last scrape less its size at the first (negative after a defrag);
- ``db_quota_pct``: the highest db size seen as a share of the quota.

Each figure is that of the worst member (the highest value), with the member named. A member restarted inside the
span counts from its restart (its counters went back). A span needs two scrapes of a member for its P99s and
counters; a figure none of the members gives is None. Pure: no Locust.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from etcd_users.files import SUMMARY_MEMBER_FIGURES
from etcd_users.members.buckets import Buckets, bucket_delta, histogram_quantile, parse_buckets

# figure -> (the buckets' column, the per-interval P99 column of older files)
_HISTOGRAM_FIGURES = {
    "fsync_p99_ms": ("FsyncBuckets", "FsyncP99Ms"),
    "commit_p99_ms": ("BackendCommitBuckets", "BackendCommitP99Ms"),
    "peer_rtt_p99_ms": ("PeerRttBuckets", "PeerRttP99Ms"),
    "snapshot_save_p99_ms": ("SnapshotSaveBuckets", "SnapshotSaveP99Ms"),
}
_COUNTER_FIGURES = {"slow_applies": "SlowApplies", "leader_changes": "LeaderChanges"}

Row = Mapping[str, object]


class Figure(NamedTuple):
    value: float | None
    member: str | None  # the worst member's endpoint; None without a value

    def to_dict(self) -> dict:
        return {"value": None if self.value is None else round(self.value, 3), "member": self.member}


class MemberFigures(NamedTuple):
    figures: dict[str, Figure]  # by name, in SUMMARY_MEMBER_FIGURES order
    scraped: bool  # at least one scrape of a member succeeded in the span
    peers: bool  # some member has peers (a cluster of more than one member)

    def to_dict(self) -> dict:
        return {name: figure.to_dict() for name, figure in self.figures.items()}


def number(value: object) -> float | None:
    """A CSV field as a number; None when empty or not a finite number."""
    if value is None or value == "":
        return None
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def member_figures(rows: Iterable[Row], start: float | None = None, end: float | None = None) -> MemberFigures:
    """The worst member's figures over the rows inside ``[start, end]`` (the whole of ``rows`` when not given)."""
    by_member = _scrapes_by_member(rows, start, end)
    per_member = {member: _one_member([row for _, row in found]) for member, found in by_member.items()}
    figures = {}
    for name in SUMMARY_MEMBER_FIGURES:
        measured = [(value, member) for member, values in per_member.items() if (value := values.get(name)) is not None]
        value, member = max(measured) if measured else (None, None)
        figures[name] = Figure(value, member)
    peers = any(parse_buckets(str(row.get("PeerRttBuckets") or "")) for found in by_member.values() for _, row in found)
    return MemberFigures(figures, bool(by_member), peers)


# what the members said over a disruption's window, beside what the clients saw: figure -> counter's column
WINDOW_COUNTERS = {"leader_changes": "LeaderChanges", "proposals_failed": "ProposalsFailed"}


def window_counters(rows: Iterable[Row], started: float, finished: float) -> dict[str, Figure] | None:
    """The worst member's leader changes and failed proposals over a window: each member's counters from its last
    scrape at or before ``started`` to its first at or after ``finished`` (their increase covers the window; etcd's
    peer round trip is left out: it observes one every 30 s). None until some member has a scrape on each side; a
    counter that went back (the member restarted) is not counted."""
    found: dict[str, list[tuple[float, str]]] = {name: [] for name in WINDOW_COUNTERS}
    spanned = False
    for member, scrapes in _scrapes_by_member(rows).items():
        before = [row for timestamp, row in scrapes if timestamp <= started]
        after = [row for timestamp, row in scrapes if timestamp >= finished]
        if not before or not after:
            continue
        spanned = True
        for name, column in WINDOW_COUNTERS.items():
            first, last = number(before[-1].get(column)), number(after[0].get(column))
            if first is not None and last is not None and last >= first:
                found[name].append((last - first, member))
    if not spanned:
        return None
    return {name: Figure(*max(values)) if values else Figure(None, None) for name, values in found.items()}


def _scrapes_by_member(
    rows: Iterable[Row], start: float | None = None, end: float | None = None
) -> dict[str, list[tuple[float, Row]]]:
    """Each member's scrapes that answered, inside ``[start, end]`` when given, as (timestamp, row) in time order."""
    by_member: dict[str, list[tuple[float, Row]]] = {}
    for row in rows:
        timestamp = number(row.get("Timestamp"))
        if timestamp is None or row.get("Error"):
            continue
        if (start is not None and timestamp < start) or (end is not None and timestamp > end):
            continue
        by_member.setdefault(str(row.get("Member", "")), []).append((timestamp, row))
    for scrapes in by_member.values():
        scrapes.sort(key=_first)
    return by_member


def _first(item: tuple[float, Row]) -> float:
    return item[0]


def _one_member(rows: list[Row]) -> dict[str, float | None]:
    first, last = rows[0], rows[-1]
    values: dict[str, float | None] = {}
    for name, (buckets_column, interval_column) in _HISTOGRAM_FIGURES.items():
        if buckets_column in last:
            values[name] = _span_p99_ms(first.get(buckets_column), last.get(buckets_column)) if len(rows) > 1 else None
        else:  # an older file: the worst interval of the span (the first row's interval began before it)
            intervals = [number(row.get(interval_column)) for row in rows[1:]]
            values[name] = max((value for value in intervals if value is not None), default=None)
    for name, column in _COUNTER_FIGURES.items():
        before, after = number(first.get(column)), number(last.get(column))
        if len(rows) < 2 or after is None:
            values[name] = None
        else:  # a counter that went back: the member restarted, and counted from zero since
            values[name] = after - before if before is not None and after >= before else after
    sizes = [(number(row.get("DbSizeBytes")), number(row.get("QuotaBytes"))) for row in rows]
    first_size, last_size = sizes[0][0], sizes[-1][0]
    values["db_growth_bytes"] = last_size - first_size if first_size is not None and last_size is not None else None
    shares = [100.0 * size / quota for size, quota in sizes if size is not None and quota]
    values["db_quota_pct"] = max(shares) if shares else None
    return values


def _span_p99_ms(before_text: object, after_text: object) -> float | None:
    """The P99 in ms of the samples between two scrapes; the worst peer's for a field of several peers."""
    before, after = parse_buckets(str(before_text or "")), parse_buckets(str(after_text or ""))
    worst = None
    for peer, buckets in after.items():
        delta: Buckets | None = bucket_delta(buckets, before.get(peer, {}))
        quantile = histogram_quantile(0.99, delta.items()) if delta else None
        if quantile is not None:
            worst = quantile * 1000.0 if worst is None else max(worst, quantile * 1000.0)
    return worst
