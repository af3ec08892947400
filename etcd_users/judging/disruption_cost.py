"""What a disruption cost the requests of one name, from per-second data and, when the run kept one, its action's own
span to 10 ms (``etcd_users.judging.disruption_span``): pure functions, for the live line and the analysis alike. No
Locust.

With the span's figures (``SpanCost``), the gap, P99, P99.9, requests and errors are the span's: a gap in ms
(``gap_ms``; ``gap_s`` the same in seconds), latencies and errors of the action's own time, not of whole seconds.
Without them (a run that kept no timeline) they are the whole seconds' below.

The data of a name is a mapping from the unix second T (the interval [T, T+1)) to that second's successes, failures
and the histogram of the successes' latencies (microseconds), as the exact latency store keeps them. A window is the
whole seconds it touches, from the second its action started in to the second it finished in: one second at least,
so a defragmentation of 40 ms is judged over the second it happened in. "Before" is the ``BEFORE_S`` whole seconds
ending where the window's first second begins.

- the gap is the longest run of whole seconds without one successful response that starts inside the window (it may
  go on after it): a resolution of one second, so a gap of N s means the true silence lay between N-1 and N+1 s;
- P99 and P99.9 during and before are those of the merged histograms of those seconds;
- recovery is the time from the action's end until the start of the first second whose own P99 is within
  ``RECOVERED_RATIO`` times the P99 before (0: the second the action ended in already was); None when no second of
  the data is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.judging.disruption_span import SpanCost

BEFORE_S = 30
RECOVERED_RATIO = 1.2


class Second(NamedTuple):
    """One second of one request name."""

    successes: int
    failures: int
    histogram: HdrHistogram | None  # the successes' latencies in µs; None without any


PerSecond = Mapping[int, Second]


class Cost(NamedTuple):
    """The cost of one window to one request name; latencies in ms, None where the seconds held no success."""

    name: str
    gap_s: float  # whole seconds without a timeline; else gap_ms in seconds
    p99_ms: float | None
    p999_ms: float | None
    p99_before_ms: float | None
    p999_before_ms: float | None
    requests: int  # during the window, failures included
    errors: int
    recovery_s: float | None
    gap_ms: float | None = None  # to 10 ms, from the timeline; None without one


def window_seconds(started_at: float, finished_at: float) -> range:
    """The whole seconds the window [started_at, finished_at] touches."""
    return range(math.floor(started_at), math.floor(max(started_at, finished_at)) + 1)


def before_seconds(started_at: float, span: int = BEFORE_S) -> range:
    first = math.floor(started_at)
    return range(first - span, first)


def merged(data: PerSecond, seconds: Iterable[int]) -> HdrHistogram | None:
    """The successes' histogram over ``seconds``; None when none succeeded."""
    histograms = [data[s].histogram for s in seconds if s in data and data[s].histogram is not None]
    histograms = [h for h in histograms if h.total_count]
    return hdr.merge(histograms) if histograms else None


def percentiles_ms(histogram: HdrHistogram | None, percentiles: tuple[float, ...] = (99.0, 99.9)) -> list[float | None]:
    if histogram is None or not histogram.total_count:
        return [None] * len(percentiles)
    return [value / 1000.0 for value in hdr.percentiles_us(histogram, percentiles)]


def longest_gap(data: PerSecond, seconds: range, last_second: int | None = None) -> int:
    """The longest run of seconds without a success that starts in ``seconds``, followed past them up to
    ``last_second`` (the newest second of the data, by default); a second missing from the data had no success."""
    last = max(data, default=seconds.stop - 1) if last_second is None else last_second
    longest = run = 0
    second = seconds.start
    while second < seconds.stop or (run and second <= last):
        if second > last:
            break
        if data.get(second, Second(0, 0, None)).successes:
            run = 0
        else:
            run += 1
            longest = max(longest, run)
        second += 1
    return longest


def recovery(data: PerSecond, finished_at: float, p99_before_ms: float | None, last_second: int | None = None):
    """Seconds from ``finished_at`` until the first second whose P99 is within ``RECOVERED_RATIO`` × ``p99_before_ms``;
    None without a P99 before, or when no second up to ``last_second`` is."""
    if p99_before_ms is None:
        return None
    last = max(data, default=-1) if last_second is None else last_second
    limit = p99_before_ms * RECOVERED_RATIO
    for second in range(math.floor(finished_at), last + 1):
        p99 = percentiles_ms(data[second].histogram, (99.0,))[0] if second in data else None
        if p99 is not None and p99 <= limit:
            return max(0.0, second - finished_at)
    return None


def cost(
    name: str,
    data: PerSecond,
    started_at: float,
    finished_at: float,
    last_second: int | None = None,
    span: SpanCost | None = None,
) -> Cost:
    """The cost of the window [started_at, finished_at] to ``name`` (``data``: its seconds), looking no further than
    ``last_second`` (the newest complete second; by default the data's newest); ``span``: the span's own figures,
    which replace the whole seconds' gap, latencies and counts."""
    window = window_seconds(started_at, finished_at)
    first = min(data, default=window.start)
    before = range(max(first, before_seconds(started_at).start), window.start)
    if last_second is not None:
        window = range(window.start, min(window.stop, last_second + 1))
    p99, p999 = percentiles_ms(merged(data, window))
    p99_before, p999_before = percentiles_ms(merged(data, before))
    inside = [data[s] for s in window if s in data]
    recovered = recovery(data, finished_at, p99_before, last_second)
    if span is not None:
        gap_ms = span.gap_ms
        gap_s = gap_ms / 1000.0 if gap_ms is not None else float(longest_gap(data, window, last_second))
        return Cost(
            name,
            gap_s,
            span.p99_ms,
            span.p999_ms,
            p99_before,
            p999_before,
            span.requests,
            span.errors,
            recovered,
            gap_ms,
        )
    return Cost(
        name,
        longest_gap(data, window, last_second),
        p99,
        p999,
        p99_before,
        p999_before,
        sum(s.successes + s.failures for s in inside),
        sum(s.failures for s in inside),
        recovered,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def describe(cost_: Cost, labels: Mapping[str, int] | None = None) -> str:
    """The cost in one line, as the run logs it; ``labels``: the errors during the window by etcd's label."""
    ratio = ""
    if cost_.p99_ms is not None and cost_.p99_before_ms:
        ratio = f", {cost_.p99_ms / cost_.p99_before_ms:.1f}x"
    errors = f"{cost_.errors} errors of {cost_.requests} requests"
    if labels:
        errors += " (" + ", ".join(f"{label} ×{count}" for label, count in sorted(labels.items())) + ")"
    recovered = (
        f"P99 within {RECOVERED_RATIO:g}x of before {cost_.recovery_s:.1f} s after the end"
        if cost_.recovery_s is not None
        else f"P99 not back within {RECOVERED_RATIO:g}x of before"
    )
    gap = f"{cost_.gap_ms:g} ms" if cost_.gap_ms is not None else f"{cost_.gap_s:g} s"
    return (
        f"{cost_.name}: longest gap without a success {gap}, P99 {_ms(cost_.p99_ms)} (before "
        f"{_ms(cost_.p99_before_ms)}{ratio}), P99.9 {_ms(cost_.p999_ms)} (before {_ms(cost_.p999_before_ms)}), "
        f"{errors}, {recovered}"
    )
