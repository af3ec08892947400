"""What the watch streams of a process delivered, in counts: events in order, out of order (or twice), and
acknowledged puts of a watched key that a watcher never delivered, and those still owed when the watchers closed.
``transport.streams.WatchFanOut`` counts them on the loop thread and adds them here when its streams are cancelled.
Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class WatchCounts:
    watchers: int = 0
    in_order: int = 0  # events whose revision is above the watcher's previous one
    disordered: int = 0  # events whose revision is not: out of order, or delivered twice
    missed: int = 0  # (acknowledged put, watcher) pairs never delivered before the watch was cancelled
    broken: int = 0  # streams that ended before they were cancelled (an error, etcd's cancel): their misses not judged
    # (acknowledged put, watcher) pairs still on their way when the watchers closed: etcd had not confirmed sending
    # them within the time given to catch up (a client too busy to read its streams); not judged
    owed: int = 0

    def add(self, other: WatchCounts) -> None:
        self.watchers += other.watchers
        self.in_order += other.in_order
        self.disordered += other.disordered
        self.missed += other.missed
        self.broken += other.broken
        self.owed += other.owed
