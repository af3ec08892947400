"""What a disruption cost one request name during its action's own span, from the merged timeline
(``etcd_users.latency.timeline``): pure functions, no Locust.

- the gap is the longest silence without a successful response of the name that overlaps the span, from the last
  success before it to the first after it (or to the end of the data, when none came yet), to 10/255 ms (0.04 ms):
  the silences found are those across the 10 ms slots' edges, which every silence of 10 ms or more is; a shorter one
  inside a slot is not seen;
- P99 and P99.9 are those of the successes that ended from the span's start to ``TAIL_S`` after its end, in 100 ms
  slots: the requests an action held come back just after it ends;
- the errors are the failures whose request was out (from its sending to its end) at some time of that same stretch,
  by etcd's label.
"""

from __future__ import annotations

from typing import NamedTuple

from etcd_users import hdr
from etcd_users.latency.timeline import SLOT_S, SuccessSlots, Timeline, place_of, slot_of, tenth_of

TAIL_S = 0.1


class SpanCost(NamedTuple):
    gap_ms: float | None  # None: the name never succeeded in the data
    p99_ms: float | None  # None: no success in the span
    p999_ms: float | None
    requests: int  # successes and failures of the span
    errors: int
    errors_by_label: dict[str, int]


def longest_silence(successes: SuccessSlots, first: int, last: int, end: int) -> float:
    """The longest silence that overlaps the slots ``first..last`` (in slots, fractional): from the last success
    before it to the first after it, or to ``end`` (the first slot whose data is not in yet) when none came after it;
    a silence before the name's first success starts at ``first``."""
    bits, origin = successes.bits, successes.origin
    low, high, stop = first - origin, last - origin, end - origin
    if stop <= low:
        return 0.0
    previous = bits.rfind(1, 0, low) if low > 0 else -1
    since = previous + place_of(successes.last[previous]) if previous != -1 else float(low)
    if previous == -1:
        previous = low - 1
    longest = 0.0
    while True:
        # indexes before the origin (a span before the name's first success) must not count from the end
        following = bits.find(1, max(previous + 1, 0), max(stop, 0)) if previous + 1 < stop else -1
        if following == -1:
            return max(longest, stop - since)
        longest = max(longest, following + place_of(successes.first[following]) - since)
        if following >= high:
            return longest
        previous = following
        since = following + place_of(successes.last[following])


def span_cost(timeline: Timeline, name: str, started_at: float, finished_at: float, covered_until: float) -> SpanCost:
    """The cost to ``name`` of the span [started_at, finished_at] (unix seconds), with every process's data in up to
    ``covered_until``."""
    successes = timeline.successes.get(name)
    gap_ms = None
    if successes is not None:
        silent = longest_silence(successes, slot_of(started_at), slot_of(finished_at), slot_of(covered_until))
        gap_ms = round(silent * SLOT_S * 1000.0, 2)
    end = finished_at + TAIL_S
    histogram = timeline.histogram(name, tenth_of(started_at), tenth_of(end))
    labels = timeline.failures(name, slot_of(started_at), slot_of(end))
    p99 = p999 = None
    succeeded = 0
    if histogram is not None and histogram.total_count:
        p99, p999 = (value / 1000.0 for value in hdr.percentiles_us(histogram, (99.0, 99.9)))
        succeeded = histogram.total_count
    errors = sum(labels.values())
    return SpanCost(gap_ms, p99, p999, succeeded + errors, errors, labels)
