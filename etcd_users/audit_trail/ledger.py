"""The writes etcd acknowledged to one process, kept compactly, and the arithmetic of reading them back at the end.

For each key of the key space (``PREFIX`` + a zero-padded counter, ``etcd_users.workload_model.keys``) the latest
acknowledged write by this process: its revision shifted left by one, the lowest bit set for a delete. A later write is
then a larger number, so keeping the latest is one comparison, and a key costs 8 bytes in an ``array('q')`` indexed by
its counter.
Pure: nothing of Locust or gRPC.
"""

from __future__ import annotations

import sys
from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# Up to 16 Mi keys (128 MiB) in one array made at the start; a larger key space keeps only the keys written, in a dict
# (about 100 bytes a key written).
ARRAY_KEYS_MAX = 1 << 24
LOST_KEYS_KEPT = 20  # lost keys kept whole per process, for the evidence file; the rest are counted only


@dataclass
class KeyCounts:
    """What reading a process's keys back at one revision found."""

    writes: int = 0  # acknowledged puts and deletes of keys of the key space
    keys: int = 0  # keys those writes touched, judged at the read's revision
    stale: int = 0  # present, but older than an acknowledged write: lost
    vanished: int = 0  # absent although the latest acknowledged write was a put, and this process did not delete it
    later: int = 0  # acknowledged after the read's revision (a read during the run): not judged
    doubtful: int = 0  # absent after a delete of this process whose answer never came (failed, or cut at the stop)
    unaudited: int = 0  # writes of keys outside the key space's form (a custom user's): not kept
    deletes: int = 0  # keys this process deleted, acknowledged: another process's vanished keys may be these
    untracked_deletes: bool = False  # deletes of ranges or in nested transactions: keys gone that way are not kept

    # the first LOST_KEYS_KEPT keys judged lost: the key, its acknowledged write and what the read back found
    lost_keys: list[dict] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Lost for sure, whoever else wrote: a key older than its acknowledged write, or one that vanished when no
        other writer could have deleted it (``vanished`` is judged against the run's other processes by the master)."""
        return self.stale + (0 if self.untracked_deletes else self.vanished)


class Ledger:
    """The latest acknowledged write of each key this process wrote."""

    def __init__(self, prefix: bytes, key_size: int, key_space_size: int) -> None:
        self._key_size = key_size
        # a key of the key space: the prefix, zeros, then the counter's digits; only those are parsed
        self._digits = len(str(max(0, key_space_size - 1)))
        self._head = prefix + b"0" * (key_size - len(prefix) - self._digits)
        self.size = key_space_size
        self.latest: array | defaultdict = (
            array("q", bytes(8 * key_space_size)) if key_space_size <= ARRAY_KEYS_MAX else defaultdict(int)
        )
        self.writes = 0
        self.deletes = 0  # single keys deleted, acknowledged
        self.untracked_deletes = 0  # deletes of ranges, or in nested transactions: which keys is not kept
        self.unaudited = 0
        # deletes sent and not answered yet, and keys of deletes that failed: etcd may have applied them all the same
        self.in_flight: dict[int, int] = {}
        self.doubtful: set[int] = set()

    def index(self, key: bytes) -> int:
        """The counter of a key of the key space; -1 for any other key."""
        if len(key) != self._key_size or not key.startswith(self._head):
            return -1
        digits = key[-self._digits :]
        if not digits.isdigit():  # ASCII digits only: no sign, space or underscore that int() would take
            return -1
        index = int(digits)
        return index if index < self.size else -1

    def key_of(self, index: int) -> bytes:
        """The key of the key space whose counter is ``index``."""
        return self._head + str(index).zfill(self._digits).encode()

    def mark(self, key: bytes) -> int:
        """The mark of ``key``'s latest acknowledged write (revision << 1, | 1 for a delete); 0: none kept."""
        index = self.index(key)
        if index < 0:
            return 0
        latest = self.latest
        return latest[index] if isinstance(latest, array) else latest.get(index, 0)

    def put(self, key: bytes, revision: int) -> None:
        self._keep(key, revision << 1)

    def delete(self, key: bytes, revision: int) -> None:
        self.deletes += 1
        self._keep(key, revision << 1 | 1)

    def delete_sent(self, key: bytes) -> int:
        """Before a delete is sent: its key's counter, for ``delete_answered`` (-1 for a key not kept)."""
        index = self.index(key)
        if index >= 0:
            self.in_flight[index] = self.in_flight.get(index, 0) + 1
        return index

    def delete_answered(self, index: int, key: bytes, revision: int | None) -> None:
        """After the delete ``delete_sent`` returned ``index`` for: acknowledged at ``revision``, or failed (None)."""
        if index >= 0:
            left = self.in_flight.pop(index) - 1
            if left:
                self.in_flight[index] = left
            if revision is None:
                self.doubtful.add(index)
        if revision is not None:
            self.delete(key, revision)

    def untracked_delete(self) -> None:
        self.untracked_deletes += 1

    def _keep(self, key: bytes, mark: int) -> None:
        index = self.index(key)
        if index < 0:
            self.unaudited += 1
            return
        self.writes += 1
        latest = self.latest
        if mark > latest[index]:  # responses of concurrent users come in any order
            latest[index] = mark

    def bytes_per_key(self) -> float:
        """Memory of the record per key of the key space (array) or per key written (dict)."""
        if isinstance(self.latest, array):
            return float(self.latest.itemsize)
        return _dict_bytes(self.latest) / max(1, len(self.latest))

    def written(self) -> Iterable[tuple[int, int]]:
        """(counter, mark) of every key written."""
        if isinstance(self.latest, array):
            return ((index, mark) for index, mark in enumerate(self.latest) if mark)
        return self.latest.items()

    def check(self, revision: int, found: dict[int, int]) -> KeyCounts:
        """Judge every key written against ``found`` (counter -> mod_revision of the keys present at ``revision``)."""
        counts = KeyCounts(
            writes=self.writes,
            unaudited=self.unaudited,
            deletes=self.deletes,
            untracked_deletes=self.untracked_deletes > 0,
        )
        for index, mark in self.written():
            acknowledged = mark >> 1
            if acknowledged > revision:
                counts.later += 1
                continue
            counts.keys += 1
            modified = found.get(index)
            if mark & 1:  # a delete: the key may only be back from a later put
                if modified is not None and modified < acknowledged:
                    counts.stale += 1
                    self._keep_lost(counts, index, mark, modified, revision, "stale")
            elif modified is None:
                if index in self.doubtful or index in self.in_flight:
                    counts.doubtful += 1
                else:
                    counts.vanished += 1
                    self._keep_lost(counts, index, mark, modified, revision, "vanished")
            elif modified < acknowledged:
                counts.stale += 1
                self._keep_lost(counts, index, mark, modified, revision, "stale")
        return counts

    def _keep_lost(self, counts: KeyCounts, index: int, mark: int, modified: int | None, read: int, how: str) -> None:
        if len(counts.lost_keys) < LOST_KEYS_KEPT:
            counts.lost_keys.append(
                {
                    "key": self.key_of(index).decode(errors="replace"),
                    "acknowledged": "delete" if mark & 1 else "put",
                    "acknowledged_revision": mark >> 1,
                    "read_revision": read,
                    "found_mod_revision": modified,  # None: absent at the read back
                    "judged": how,  # stale: older than the acknowledged write; vanished: gone, deleted by no one
                }
            )


def _dict_bytes(table: dict) -> int:
    return sys.getsizeof(table) + sum(sys.getsizeof(key) + sys.getsizeof(value) for key, value in table.items())
