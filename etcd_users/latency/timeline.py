"""When each request name succeeded and failed, finer than the per-second histograms: what a disruption's cost reads
to the millisecond. Pure: no Locust.

The recording side (``LatencyStore.record``) keeps each success's end time (unix) beside its latency; when the second
closes, ``second_part`` turns them into a report part: per request name the 10 ms slots (unix time × 100, whole) that
had a success with the places of their first and last success (a byte each: their place in the slot, to 10/255 ms),
and the latencies in 100 ms slots ("tenths") as non-zero HDR counts. Failures are counted by
request name, etcd's label, and the 10 ms slots their request was sent and ended in.

``Timeline`` is the merged side (master or single process): the union of every process's success slots per name as
three bytes per 10 ms since the run's first (whether, first, last: an hour is about 1 MB a name), the tenths' counts of
the last ``keep_s`` seconds, and the failures of the same seconds. Times are wall-clock (``time.time()``): across
processes of one machine their union is exact; across machines it rests on their clocks' agreement (NTP: a few ms on
a LAN).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from etcd_users import hdr

SLOTS_PER_S = 100  # a success's time, to 10 ms
SLOTS_PER_TENTH = 10  # latencies in 100 ms slots
SLOT_S = 1.0 / SLOTS_PER_S
TENTH_S = SLOT_S * SLOTS_PER_TENTH

Key = tuple[str, str, str]  # (request type, name, series)
FailureKey = tuple[str, str, int, int]  # (name, etcd's label, the slot it was sent in, the slot it ended in)


def slot_of(unix_time: float) -> int:
    return int(unix_time * SLOTS_PER_S)


def tenth_of(unix_time: float) -> int:
    return int(unix_time * SLOTS_PER_S) // SLOTS_PER_TENTH


def place_code(unix_time: float, slot: int) -> int:
    """A time's place inside its slot as one byte, 1-255 (0: no success)."""
    return 1 + min(254, max(0, int((unix_time * SLOTS_PER_S - slot) * 255)))


def place_of(code: int) -> float:
    """The middle of a ``place_code``'s span, in slots from the slot's start."""
    return (code - 0.5) / 255


# -- the recording side: one closed second into a report part --


def second_part(recorded: Mapping[Key, Sequence[float]], failures: Mapping[FailureKey, int]) -> dict[str, list]:
    """One second's part of a report: ``recorded`` per service key alternates each success's latency (ms) and its end
    (unix time), as the store keeps them; ``failures`` as the store counted them. A few array operations a name."""
    by_name: dict[str, list[np.ndarray]] = {}
    for key, values in recorded.items():
        if len(values):
            by_name.setdefault(key[1], []).append(np.asarray(values, dtype=np.float64).reshape(-1, 2))
    successes: list[list[Any]] = []
    tenths: list[list[Any]] = []
    for name, arrays in by_name.items():
        pairs = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
        ends = pairs[:, 1]
        slots = np.floor(ends * SLOTS_PER_S).astype(np.int64)
        order = np.argsort(slots, kind="stable")
        slots, ends = slots[order], ends[order]
        micros, indexes = hdr.counts_indexes(pairs[order, 0])
        starts = np.flatnonzero(np.r_[True, slots[1:] != slots[:-1]])
        kept = slots[starts]
        places = (ends * SLOTS_PER_S - slots) * 255
        firsts = 1 + np.clip(np.minimum.reduceat(places, starts).astype(np.int64), 0, 254)
        lasts = 1 + np.clip(np.maximum.reduceat(places, starts).astype(np.int64), 0, 254)
        successes.append([name, kept.tolist(), firsts.tolist(), lasts.tolist()])
        tenth_of_each = slots // SLOTS_PER_TENTH
        bounds = [*np.flatnonzero(np.r_[True, tenth_of_each[1:] != tenth_of_each[:-1]]).tolist(), len(slots)]
        for begin, end in zip(bounds, bounds[1:], strict=False):
            values, counts = np.unique(indexes[begin:end], return_counts=True)
            span = micros[begin:end]
            tenth = int(tenth_of_each[begin])
            tenths.append([tenth, name, values.tolist(), counts.tolist(), int(span.min()), int(span.max())])
    return {
        "successes": successes,
        "tenths": tenths,
        "failures": [[*key, count] for key, count in failures.items()],
    }


# -- the merged side --


class _Chunk(NamedTuple):
    """Part of one tenth of one name: non-zero HDR counts by index, and their exact extremes (µs)."""

    indexes: np.ndarray
    counts: np.ndarray
    min_us: int
    max_us: int


class SuccessSlots:
    """Three bytes per 10 ms slot from ``origin``: ``bits`` 1 when some process had a success of the name in it, and
    the places of the first and last (``place_code``) among every process's."""

    def __init__(self, origin: int) -> None:
        self.origin = origin
        self.bits = bytearray()
        self.first = bytearray()
        self.last = bytearray()

    def add(self, slots: Iterable[int], firsts: Iterable[int], lasts: Iterable[int]) -> None:
        for slot, first, last in zip(slots, firsts, lasts, strict=True):
            if slot < self.origin:  # another process's earlier success: grow to the left
                for array in (self.bits, self.first, self.last):
                    array[0:0] = bytes(self.origin - slot)
                self.origin = slot
            index = slot - self.origin
            if index >= len(self.bits):
                more = bytes(index + 1 - len(self.bits) + SLOTS_PER_S * 60)  # a minute at a time
                for array in (self.bits, self.first, self.last):
                    array.extend(more)
            if self.bits[index]:
                self.first[index] = min(self.first[index], first)
                self.last[index] = max(self.last[index], last)
            else:
                self.bits[index], self.first[index], self.last[index] = 1, first, last

    def has(self, slot: int) -> bool:
        index = slot - self.origin
        return 0 <= index < len(self.bits) and self.bits[index] == 1


class Timeline:
    """The merged success slots, tenths and failures of one run, per request name."""

    def __init__(self, keep_s: int = 0) -> None:
        self.keep_s = keep_s  # the tenths and failures of this many seconds before the newest are kept
        self.clear()

    def clear(self) -> None:
        self.successes: dict[str, SuccessSlots] = {}
        self._tenths: dict[int, dict[str, list[_Chunk]]] = {}
        self._failures: dict[FailureKey, int] = {}
        self._newest_tenth = 0

    def add(self, part: Mapping[str, Any]) -> None:
        """Merge a ``second_part`` from any process."""
        for name, slots, firsts, lasts in part.get("successes", ()):
            if slots:
                bits = self.successes.get(name)
                if bits is None:
                    bits = self.successes[name] = SuccessSlots(min(slots))
                bits.add(slots, firsts, lasts)
        oldest = self._newest_tenth - self.keep_s * SLOTS_PER_S // SLOTS_PER_TENTH
        for tenth, name, indexes, counts, min_us, max_us in part.get("tenths", ()):
            if tenth < oldest:
                continue
            chunk = _Chunk(np.asarray(indexes, dtype=np.int64), np.asarray(counts, dtype=np.int64), min_us, max_us)
            self._tenths.setdefault(tenth, {}).setdefault(name, []).append(chunk)
            self._newest_tenth = max(self._newest_tenth, tenth)
        for name, label, sent, ended, count in part.get("failures", ()):
            key = (name, label, sent, ended)
            self._failures[key] = self._failures.get(key, 0) + count
        self._forget()

    def _forget(self) -> None:
        oldest = self._newest_tenth - self.keep_s * SLOTS_PER_S // SLOTS_PER_TENTH
        for tenth in [tenth for tenth in self._tenths if tenth < oldest]:
            del self._tenths[tenth]
        oldest_slot = oldest * SLOTS_PER_TENTH
        for key in [key for key in self._failures if key[3] < oldest_slot]:
            del self._failures[key]

    def names(self) -> list[str]:
        names = set(self.successes) | {name for per_name in self._tenths.values() for name in per_name}
        return sorted(names | {key[0] for key in self._failures})

    def histogram(self, name: str, first_tenth: int, last_tenth: int) -> HdrHistogram | None:
        """The successes of ``name`` that ended in the tenths ``first_tenth..last_tenth``; None without one."""
        chunks = [
            chunk for tenth in range(first_tenth, last_tenth + 1) for chunk in self._tenths.get(tenth, {}).get(name, ())
        ]
        if not chunks:
            return None
        histogram = hdr.new_histogram()
        counts = np.ctypeslib.as_array(histogram.counts)
        for chunk in chunks:
            np.add.at(counts, chunk.indexes, chunk.counts)
            histogram.total_count += int(chunk.counts.sum())
        histogram.min_value = min(chunk.min_us for chunk in chunks)
        histogram.max_value = max(chunk.max_us for chunk in chunks)
        return histogram

    def failures(self, name: str, first_slot: int, last_slot: int) -> dict[str, int]:
        """The failures of ``name`` by etcd's label whose request was out (from its sending to its end) at some time
        of the slots ``first_slot..last_slot``."""
        labels: dict[str, int] = {}
        for (failed_name, label, sent, ended), count in self._failures.items():
            if failed_name == name and sent <= last_slot and ended >= first_slot:
                labels[label] = labels.get(label, 0) + count
        return labels
