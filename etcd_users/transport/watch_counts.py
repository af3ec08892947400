"""What the watch streams of a process delivered, counted per guarantee of etcd's watch: ordered, unique, reliable
(no acknowledged put missed), atomic (a revision's events in one response) and progress notifications never ahead of
the events. ``transport.streams.WatchFanOut``, ``watchers.streams.PrefixWatchers`` and the Kubernetes users' watches
count them on the loop thread (each response judged by ``WatchCounts.judge``) and add them here when their streams are
cancelled. Pure."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class WatchCounts:
    watchers: int = 0
    in_order: int = 0  # events whose revision is above the watcher's previous one (or a transaction's next event)
    disordered: int = 0  # events whose revision is below the watcher's previous one: out of order
    missed: int = 0  # (acknowledged put, watcher) pairs never delivered before the watch was cancelled
    broken: int = 0  # watchers etcd cancelled (a compaction of the revision they were at): their misses not judged
    # (acknowledged put, watcher) pairs still on their way when the watchers closed: etcd had not confirmed sending
    # them within the time given to catch up (a client too busy to read its streams); not judged
    owed: int = 0
    repeated: int = 0  # events a watcher had already been delivered: its previous event's revision and key again
    split: int = 0  # responses that began with the revision the watcher's previous response ended with: not atomic
    # events that came after a progress notification of their stream or watcher at or above their revision: etcd
    # had said every event up to it was sent
    ahead: int = 0
    resumed: int = 0  # streams that broke and were opened again, each watcher from the revision after its last event
    relisted: int = 0  # watchers etcd cancelled because their revision was compacted, listed and watched again
    prev_kv_checked: int = 0  # events whose prevKV could be checked against the key's version delivered before
    prev_kv_wrong: int = 0  # and of those, prevKVs that were not that version (or present after a delete)

    def judge(self, events, previous: int, last_key: bytes) -> int:
        """One response's ``events`` of one watcher, whose previous response ended at revision ``previous`` with key
        ``last_key``: counted in order or out of order, repeated (its previous event again) or split (its first
        revision the one the previous response ended with, another key: a revision over two responses). The revision
        the watcher is at after it."""
        first = events[0].kv
        if first.mod_revision == previous:
            if first.key == last_key:
                self.repeated += 1
                self.in_order -= 1  # which the loop below counts it as
            else:
                self.split += 1
        for event in events:
            revision = event.kv.mod_revision
            if revision >= previous:  # a transaction's or a range delete's events share one revision: in order
                self.in_order += 1
                previous = revision
            else:
                self.disordered += 1
        return previous

    def add(self, other: WatchCounts) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    @property
    def violations(self) -> int:
        """Events or puts that broke a guarantee: out of order, repeated, missed, split, behind a progress
        notification, or with a wrong prevKV."""
        return self.disordered + self.repeated + self.missed + self.split + self.ahead + self.prev_kv_wrong

    def describe(self) -> str:
        """``2,565 watch events in order, 0 missed, 0 repeated, 0 out of order, 0 split, 0 behind a progress
        notification``, and what was not judged."""
        text = (
            f"{self.in_order:,} watch events in order, {self.missed:,} missed, {self.repeated:,} repeated, "
            f"{self.disordered:,} out of order, {self.split:,} split, {self.ahead:,} behind a progress notification"
        )
        if self.prev_kv_checked:
            text += f", {self.prev_kv_wrong:,} of {self.prev_kv_checked:,} prevKV wrong"
        if self.resumed:
            text += f" ({self.resumed:,} streams resumed after they broke)"
        if self.relisted:
            text += f" ({self.relisted:,} relists after etcd compacted a watcher's revision)"
        if self.broken:
            text += f" ({self.broken:,} watchers cancelled by etcd, not judged)"
        if self.owed:
            text += f" ({self.owed:,} still on their way when the watchers closed, not judged)"
        return text
