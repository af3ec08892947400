"""Prometheus histograms as etcd exposes them: cumulative buckets, their quantiles and their text in one CSV field.

Pure: the poller (``etcd_users.members.server_metrics``), the pre-flight report and the members' figures
over a span of time (``etcd_users.members.member_figures``) share it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable

Buckets = dict[float, float]  # upper bound ("le") -> cumulative count


def histogram_quantile(quantile: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile`` over cumulative ``(upper bound, count)`` buckets; None without samples.

    As Prometheus does: the rank ``quantile * total`` falls in the first bucket whose cumulative count reaches it,
    and the value is interpolated linearly between that bucket's lower and upper bound (the lowest bucket starts
    at 0). A rank in the +Inf bucket gives the highest finite bound. Without a +Inf bucket there is no answer.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile {quantile!r} is not between 0 and 1")
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    bounds = sorted(merged)
    if len(bounds) < 2 or bounds[-1] != math.inf:
        return None
    counts: list[float] = []
    for bound in bounds:  # counts that go down (scraped mid-update) are raised, as Prometheus does
        counts.append(max(merged[bound], counts[-1]) if counts else merged[bound])
    total = counts[-1]
    if total <= 0:
        return None
    rank = quantile * total
    index = bisect_left(counts, rank)
    if index == len(bounds) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, in_bucket = 0.0, bounds[index], counts[index]
    if index > 0:
        start = bounds[index - 1]
        in_bucket -= counts[index - 1]
        rank -= counts[index - 1]
    if in_bucket <= 0:
        return start
    return start + (end - start) * (rank / in_bucket)


def bucket_delta(after: Buckets, before: Buckets | None) -> Buckets | None:
    """The buckets of the samples observed between two scrapes; ``after`` alone when the member restarted."""
    if before is None:
        return None
    delta = {bound: count - before.get(bound, 0.0) for bound, count in after.items()}
    if any(count < 0 for count in delta.values()):
        return dict(after)  # counters went back: the member restarted since ``before``
    return delta


def interval_p99_ms(after: Buckets, before: Buckets | None) -> float | None:
    """P99 in ms of a duration histogram (seconds) over the samples between two scrapes; None without any."""
    delta = bucket_delta(after, before)
    if not delta:
        return None
    value = histogram_quantile(0.99, delta.items())
    return None if value is None else value * 1000.0


def format_buckets(buckets: Buckets, peer: str = "") -> str:
    """``LE=COUNT;…`` in bound order (``PEER@LE=COUNT`` for a peer's histogram); empty without buckets."""
    at = f"{peer}@" if peer else ""
    return ";".join(f"{at}{bound!r}={count:.0f}" for bound, count in sorted(buckets.items()))


def parse_buckets(text: str) -> dict[str, Buckets]:
    """The histograms of one field by peer ("" for a histogram without peers); {} for an empty or garbled field."""
    histograms: dict[str, Buckets] = {}
    for item in (text or "").split(";"):
        peer, _, bucket = item.rpartition("@")
        bound, equals, count = bucket.partition("=")
        try:
            le, value = float(bound), float(count)
        except ValueError:
            continue
        if equals and not math.isnan(le) and math.isfinite(value):
            histograms.setdefault(peer, {})[le] = value
    return histograms
