"""What a process's watchers saw, in counts that add up across processes. Pure.

``busy_intervals`` of ``event_intervals``: the progress intervals in which events came, and those in which the
process was busy: it wanted a whole core (its CPU plus its run-queue wait at least ``CLIENT_BOUND_PCT`` % of one), or
its transport's loop ran a callback posted to it ``CLIENT_LAG_S`` late or later (the responses gRPC had received were
waiting for the loop: the loop's thread had no CPU, or too much to do). A watch client that is busy most of the time
it receives events queues them, and its delivery latency measures it, not etcd.

``behind`` is a revision lag: at each response with events, the newest revision the process has heard of (any
response's header) minus the response's last event's revision. ``by_response`` counts every response's lag,
``by_watcher`` each watcher's largest. Lags are kept in buckets: exact below 100, two significant digits above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from etcd_users.files import CLIENT_BOUND_PCT

COMPACTED_LABEL = "mvcc: required revision has been compacted"
CANCELED_LABEL = "etcdserver: watch canceled"  # etcd ended the watcher and said no reason
CLIENT_LAG_S = 0.05  # seconds: a backlog of 50 ms on the loop outweighs etcd's own watch latency many times


def bucket(lag: int) -> int:
    """``lag`` rounded down to two significant digits (exact below 100): a bounded number of keys."""
    if lag < 100:
        return lag
    unit = 10 ** (len(str(lag)) - 2)
    return lag - lag % unit


def cancel_label(reason: str, compact_revision: int) -> str:
    """etcd's reason for a cancelled watcher, as the failure's label."""
    if reason:
        return reason
    return COMPACTED_LABEL if compact_revision > 0 else CANCELED_LABEL


def percentile(buckets: dict[int, int], share: float) -> int:
    """The bucket at ``share`` (0–1) of the counts, 0 without any."""
    total = sum(buckets.values())
    if total == 0:
        return 0
    rank = share * total
    seen = 0
    for lag in sorted(buckets):
        seen += buckets[lag]
        if seen >= rank:
            return lag
    return max(buckets)


@dataclass
class WatchTally:
    watchers: int = 0  # created and confirmed by etcd
    events: int = 0
    progress: int = 0  # progress notifications (responses without events)
    first: float | None = None  # time.time() of the first event, and of the last
    last: float | None = None
    by_response: dict[int, int] = field(default_factory=dict)
    by_watcher: dict[int, int] = field(default_factory=dict)
    cancelled: dict[str, int] = field(default_factory=dict)
    event_intervals: int = 0  # progress intervals in which events came (in each process)
    busy_intervals: int = 0  # and of those, the ones in which the process wanted a whole core

    def add(self, other: WatchTally) -> None:
        self.watchers += other.watchers
        self.events += other.events
        self.progress += other.progress
        self.event_intervals += other.event_intervals
        self.busy_intervals += other.busy_intervals
        if other.first is not None:
            self.first = other.first if self.first is None else min(self.first, other.first)
            self.last = other.last if self.last is None else max(self.last, other.last)
        for mine, theirs in (
            (self.by_response, other.by_response),
            (self.by_watcher, other.by_watcher),
            (self.cancelled, other.cancelled),
        ):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count

    @property
    def events_per_second(self) -> float:
        if self.first is None or self.last is None or self.last <= self.first:
            return 0.0
        return self.events / (self.last - self.first)

    def count_interval(self, had_events: bool, demand_pct: float | None, loop_lag_s: float | None = None) -> None:
        """One progress interval: whether events came, the CPU plus run-queue wait of the process (% of a core) and
        how late the transport's loop ran a callback posted to it (seconds)."""
        if had_events:
            self.event_intervals += 1
            wanted_a_core = demand_pct is not None and demand_pct >= CLIENT_BOUND_PCT
            if wanted_a_core or (loop_lag_s is not None and loop_lag_s >= CLIENT_LAG_S):
                self.busy_intervals += 1

    @property
    def client_bound(self) -> bool:
        """The client was busy in at least half of the intervals in which events came."""
        return self.event_intervals > 0 and 2 * self.busy_intervals >= self.event_intervals

    @property
    def watchers_behind(self) -> int:
        """Watchers that delivered at least one event behind the newest revision known."""
        return sum(count for lag, count in self.by_watcher.items() if lag > 0)

    def to_dict(self) -> dict:
        return {
            "watchers": self.watchers,
            "events": self.events,
            "progress": self.progress,
            "first": self.first,
            "last": self.last,
            # JSON keys are text: lags as [lag, count] pairs
            "by_response": sorted(self.by_response.items()),
            "by_watcher": sorted(self.by_watcher.items()),
            "cancelled": dict(self.cancelled),
            "event_intervals": self.event_intervals,
            "busy_intervals": self.busy_intervals,
        }

    @classmethod
    def from_dict(cls, data: dict) -> WatchTally:
        return cls(
            watchers=int(data.get("watchers", 0)),
            events=int(data.get("events", 0)),
            progress=int(data.get("progress", 0)),
            first=data.get("first"),
            last=data.get("last"),
            by_response={int(lag): int(count) for lag, count in data.get("by_response", ())},
            by_watcher={int(lag): int(count) for lag, count in data.get("by_watcher", ())},
            cancelled={str(label): int(count) for label, count in data.get("cancelled", {}).items()},
            event_intervals=int(data.get("event_intervals", 0)),
            busy_intervals=int(data.get("busy_intervals", 0)),
        )

    def summary(self) -> dict | None:
        """The run summary's ``watch``: the watchers' figures and whether the client kept up; None without watch
        events."""
        if not (self.watchers or self.event_intervals or self.cancelled):
            return None
        return {
            "watchers": self.watchers,
            "events": self.events,
            "events_per_s": round(self.events_per_second, 1),
            "cancelled": dict(self.cancelled),
            "client_bound": self.client_bound,
            "busy_intervals": self.busy_intervals,
            "event_intervals": self.event_intervals,
        }

    def client_line(self) -> str:
        """The warning of a client-bound watch run."""
        return (
            f"watchers: client-bound: the load generator was busy (a whole core wanted, or its transport's loop "
            f"{CLIENT_LAG_S * 1000:g} ms or more behind) in {self.busy_intervals} of the {self.event_intervals} "
            "intervals with events, so events queued in the client and the watch delivery latency measures it, not "
            "etcd; spread the watchers over more processes (--processes N or workers) or use fewer per process"
        )

    def line(self) -> str:
        """``watchers: 1000 watchers, 80000 events (21000.5/s), behind: P50 0 P99 3 max 12 revisions, …``"""
        responses = self.by_response
        behind = (
            f"P50 {percentile(responses, 0.5)} P99 {percentile(responses, 0.99)} "
            f"max {max(responses, default=0)} revisions"
        )
        cancelled = ", ".join(f"{label} {count}" for label, count in sorted(self.cancelled.items())) or "none"
        return (
            f"watchers: {self.watchers} watchers, {self.events} events ({self.events_per_second:.1f}/s), "
            f"{self.progress} progress notifications, behind: {behind}, {self.watchers_behind} watchers behind "
            f"(worst {max(self.by_watcher, default=0)}), cancelled: {cancelled}"
        )
