"""Repeats compared by rank: the exact Mann–Whitney U test (as Go's benchstat does), the distribution-free interval
of the shift it implies (Hodges–Lehmann), and how many runs a side a shift needs.

Why ranks: a handful of runs a side, whose figures move with the machine's other load, are neither normal nor
many; a rank test assumes neither. Its price is a floor on the runs: with ``n`` runs a side the smallest one-sided
p-value is ``1 / C(2n, n)``, so a 95 % interval (2.5 % a side) needs 4 runs a side (1/70) and 3 a side can never
decide (1/20).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np

# z for one-sided 2.5 % (the interval's each side) and for 80 % power
Z_975 = 1.959964
Z_80 = 0.841621
# the asymptotic efficiency of the U test against Student's t on normal data (3/pi): it needs 1/0.955 the runs
RANK_EFFICIENCY = 3 / math.pi


@cache
def u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many of the C(n+m, n) orderings of two samples (n and m values, no ties) give U = 0, 1, ..., n*m, where U
    counts the pairs (x from the first, y from the second) with x > y."""
    if n == 0 or m == 0:
        return (1,)
    # the largest value is either the first sample's (it beats all m) or the second's
    with_first, with_second = u_counts(n - 1, m), u_counts(n, m - 1)
    counts = [0] * (n * m + 1)
    for u, count in enumerate(with_first):
        counts[u + m] += count
    for u, count in enumerate(with_second):
        counts[u] += count
    return tuple(counts)


def u_statistic(first: Sequence[float], second: Sequence[float]) -> float:
    """Pairs with first > second, a tie counting one half."""
    a, b = np.asarray(first, float)[:, None], np.asarray(second, float)[None, :]
    return float((a > b).sum() + 0.5 * (a == b).sum())


def p_greater(first: Sequence[float], second: Sequence[float]) -> float:
    """The exact one-sided p-value of 'second tends to be larger than first': P(U <= u) under no difference."""
    n, m = len(first), len(second)
    u = u_statistic(first, second)
    counts = u_counts(n, m)
    return sum(counts[: math.floor(u) + 1]) / math.comb(n + m, n)


def p_two_sided(first: Sequence[float], second: Sequence[float]) -> float:
    return min(1.0, 2 * min(p_greater(first, second), p_greater(second, first)))


def rank_k(n: int, m: int, alpha_each_side: float) -> int:
    """The largest k with P(U <= k - 1) <= alpha: the interval runs from the k-th smallest to the k-th largest of the
    n*m pairwise differences. 0 when n and m are too few for that level."""
    counts, total, cumulative = u_counts(n, m), math.comb(n + m, n), 0
    for k, count in enumerate(counts):
        cumulative += count
        if cumulative / total > alpha_each_side:
            return k
    return len(counts)


def shift_interval(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The Hodges–Lehmann shift (candidate - baseline: the median of the pairwise differences) and its exact
    distribution-free interval; (shift, -inf, +inf) when there are too few values a side for ``confidence``."""
    differences = np.sort(np.subtract.outer(np.asarray(candidate, float), np.asarray(baseline, float)).ravel())
    shift = float(np.median(differences))
    k = rank_k(len(baseline), len(candidate), (1 - confidence) / 2)
    if k == 0:
        return shift, -math.inf, math.inf
    return shift, float(differences[k - 1]), float(differences[-k])


def least_runs(confidence: float = 0.95) -> int:
    """The fewest runs a side with which the rank interval exists at ``confidence``."""
    n = 1
    while rank_k(n, n, (1 - confidence) / 2) == 0:
        n += 1
    return n


def runs_a_side(spread: float, margin: float, rank: bool = True) -> int | None:
    """Runs a side that find a shift ``margin`` beyond the tolerance worse 80 % of the time, when one run's figure
    has standard deviation ``spread`` (normal approximation, less efficient by 3/pi for ranks); None without one."""
    if not (math.isfinite(spread) and spread >= 0 and margin > 0):
        return None
    needed = 2 * ((Z_975 + Z_80) * spread / margin) ** 2 / (RANK_EFFICIENCY if rank else 1)
    return max(least_runs() if rank else 2, math.ceil(needed))
