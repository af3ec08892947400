"""Which key of the key space each request takes: uniform, sequential, zipfian, latest or hotspot, as YCSB draws them.

The draws are YCSB's (Cooper et al., "Benchmarking cloud serving systems with YCSB", 2010): zipfian by Gray et al.'s
algorithm ("Quickly generating billion-record synthetic databases", SIGMOD 1994) over the key space's ranks, the
ranks spread over the key space by the FNV-1a hash of the rank (YCSB's scrambled zipfian: the hottest keys are not
neighbours); "latest" draws the rank back from the newest key written; hotspot sends HOT_OPS of the requests to the
first HOT_FRACTION of the keys. Each also knows its theoretical share of requests that go to the hottest 1 % of keys.

Pure: nothing of Locust, gevent or gRPC. A draw is a closure over a ``random.Random``'s ``random``: one call, a few
arithmetic operations and, for zipfian, a dict look-up of the scrambled rank.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from etcd_users.core.arguments import shown

KINDS = ("uniform", "sequential", "zipfian", "latest", "hotspot")
ZIPFIAN_THETA = 0.99  # YCSB's ZipfianGenerator.ZIPFIAN_CONSTANT
HOT_FRACTION, HOT_OPS = 0.2, 0.8  # YCSB's hotspot defaults: 20 % of the keys take 80 % of the requests
HOTTEST_SHARE = 0.01  # the analysis's measure of skew: the share of requests to the hottest 1 % of keys
EXACT_ZETA_TERMS = 100_000  # above, the tail of the zeta sum is Euler-Maclaurin's: start-up stays under 0.1 s
_KEPT_RANKS = 1 << 20  # scrambled ranks kept per draw: the hottest million, a few tens of MB at most

_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1

Draw = Callable[[], int]


@dataclass(frozen=True)
class KeyDistribution:
    """A parsed ``--etcd-key-distribution``."""

    kind: str = "uniform"
    theta: float = ZIPFIAN_THETA
    hot_fraction: float = HOT_FRACTION
    hot_ops: float = HOT_OPS

    def __str__(self) -> str:
        if self.kind == "zipfian":
            return f"zipfian:{self.theta:g}"
        if self.kind == "latest":
            return f"latest (zipfian:{self.theta:g} back from the newest key)"
        if self.kind == "hotspot":
            return f"hotspot:{self.hot_fraction:g}:{self.hot_ops:g}"
        return self.kind

    def hottest_share(self, size: int) -> float:
        """The theoretical share of requests to the hottest 1 % of ``size`` keys (at least one key).

        For latest, of the reads (its writes walk the key space in order); for zipfian, counted in ranks: two ranks
        that hash to one key make that key hotter, so the hottest keys' measured share may come out a little above.
        """
        hottest = max(1, math.ceil(size * HOTTEST_SHARE))
        if self.kind in ("zipfian", "latest"):
            return zipfian_share(hottest, size, self.theta)
        if self.kind == "hotspot":
            hot = hot_keys(size, self.hot_fraction)
            if hottest <= hot:
                return self.hot_ops * hottest / hot
            cold_ops = 1.0 - self.hot_ops if hot else 1.0
            return (self.hot_ops if hot else 0.0) + cold_ops * (hottest - hot) / (size - hot)
        return hottest / size


def writes_per_key(before: dict[bytes, int], after: dict[bytes, int]) -> list[int]:
    """The puts each key took between two reads of the keys' ``version`` (a key's puts since it was created): the
    difference, or the whole version of a key created anew in between (deleted and written again)."""
    counts = []
    for key, version in after.items():
        earlier = before.get(key, 0)
        counts.append(version - earlier if version >= earlier else version)
    return [count for count in counts if count > 0]


def counted_hottest_share(writes: list[int], size: int) -> float | None:
    """The share of ``writes`` (puts per key) that went to the hottest 1 % of ``size`` keys; None without writes."""
    total = sum(writes)
    if total <= 0 or size <= 0:
        return None
    hottest = max(1, math.ceil(size * HOTTEST_SHARE))
    return sum(sorted(writes, reverse=True)[:hottest]) / total


def parse_key_distribution(text: str) -> KeyDistribution:
    """``uniform``, ``sequential``, ``zipfian[:THETA]``, ``latest[:THETA]`` or ``hotspot[:HOT_FRACTION:HOT_OPS]``;
    ValueError with the fix otherwise (the option's parser puts its name in front)."""
    kind, *numbers = (part.strip() for part in text.strip().split(":"))
    kind = kind.lower()
    usage = (
        "give uniform, sequential, zipfian[:THETA] (0 < THETA < 1, e.g. zipfian:0.99), latest[:THETA] or "
        "hotspot[:HOT_FRACTION:HOT_OPS] (e.g. hotspot:0.2:0.8)"
    )
    if kind not in KINDS:
        raise ValueError(f"{shown(text)} is not a key distribution; {usage}")
    values = []
    for number in numbers:
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{shown(number)} in {shown(text)} is not a finite number; {usage}")
        values.append(value)
    if kind in ("uniform", "sequential"):
        if values:
            raise ValueError(f"{kind} takes no parameter, {shown(text)} gives {len(values)}; give {kind}")
        return KeyDistribution(kind)
    if kind in ("zipfian", "latest"):
        if len(values) > 1:
            raise ValueError(f"{kind} takes one parameter, THETA; give e.g. {kind}:0.99")
        theta = values[0] if values else ZIPFIAN_THETA
        if not 0.0 < theta < 1.0:
            raise ValueError(
                f"THETA {theta:g} is outside (0, 1), where Gray et al.'s zipfian draws; give e.g. {kind}:0.99"
            )
        return KeyDistribution(kind, theta=theta)
    if len(values) not in (0, 2):
        raise ValueError("hotspot takes HOT_FRACTION:HOT_OPS or nothing; give e.g. hotspot:0.2:0.8")
    hot_fraction, hot_ops = values or (HOT_FRACTION, HOT_OPS)
    if not 0.0 < hot_fraction < 1.0 or not 0.0 <= hot_ops <= 1.0:
        raise ValueError(
            f"HOT_FRACTION must be in (0, 1) and HOT_OPS in [0, 1], {shown(text)} gives {hot_fraction:g} and "
            f"{hot_ops:g}; give e.g. hotspot:0.2:0.8"
        )
    return KeyDistribution(kind, hot_fraction=hot_fraction, hot_ops=hot_ops)


# -- the draws: each returns a callable that gives an index in [0, size) --


def reader(distribution: KeyDistribution, size: int, generator: random.Random, newest: Callable[[], int]) -> Draw:
    """The index draw of reads and of any request that does not write a new key (``newest``: latest's newest key)."""
    uniform = generator.random
    kind = distribution.kind
    if kind == "uniform":
        return lambda: int(uniform() * size)  # uniform to 2**-53, at half the cost of randrange
    if kind == "sequential":
        return itertools.cycle(range(size)).__next__
    if kind == "zipfian":
        rank, scrambled = zipfian_ranks(size, distribution.theta, uniform), scramble(size)
        return lambda: scrambled(rank())
    if kind == "latest":
        rank = zipfian_ranks(size, distribution.theta, uniform)

        def latest() -> int:
            # back from the newest key: around the end of a key space written in cycles, never past key 0 of one that
            # grows (YCSB's inserts, whose newest key is beyond the first ``size``)
            index = newest() - rank()
            return index if index >= 0 else index + size

        return latest
    hot = hot_keys(size, distribution.hot_fraction)
    cold = size - hot
    hot_ops = distribution.hot_ops if hot else 0.0
    if cold == 0:
        return lambda: int(uniform() * size)

    def hotspot() -> int:
        if uniform() < hot_ops:
            return int(uniform() * hot)
        return hot + int(uniform() * cold)

    return hotspot


def scramble(size: int) -> Callable[[int], int]:
    """A zipfian rank's index: FNV-1a of the rank modulo the size (YCSB's scrambled zipfian), the hottest ranks'
    indexes kept once computed."""
    kept: dict[int, int] = {}
    get = kept.get

    def index(rank: int) -> int:
        found = get(rank)
        if found is None:
            found = fnv1a_64(rank) % size
            if rank < _KEPT_RANKS:
                kept[rank] = found
        return found

    return index


def hot_keys(size: int, hot_fraction: float) -> int:
    """The hotspot's hot keys, the first ones of the key space (YCSB's hot interval)."""
    return int(size * hot_fraction)


def zipfian_ranks(size: int, theta: float, uniform: Callable[[], float]) -> Draw:
    """Ranks in [0, size), rank 0 the most frequent, drawn as Gray et al.'s algorithm (YCSB's ZipfianGenerator)."""
    zeta_n = zeta(size, theta)
    alpha = 1.0 / (1.0 - theta)
    eta = (1.0 - (2.0 / size) ** (1.0 - theta)) / (1.0 - zeta(2, theta) / zeta_n) if size > 2 else 0.0
    second = 1.0 + 0.5**theta
    last = size - 1

    def rank() -> int:
        u = uniform()
        uz = u * zeta_n
        if uz < 1.0:
            return 0
        if uz < second:
            return min(1, last)
        return min(int(size * (eta * u - eta + 1.0) ** alpha), last)

    return rank


def zipfian_share(ranks: int, size: int, theta: float) -> float:
    """The share of draws of ``zipfian_ranks`` below ``ranks``: Gray et al.'s algorithm gives the first two ranks their
    exact zipfian weights and the others by a continuous approximation, whose share this is (slightly above the exact
    zipfian sum's for the ranks after the first two)."""
    zeta_n = zeta(size, theta)
    if ranks >= size:
        return 1.0
    if ranks <= 2:
        return zeta(ranks, theta) / zeta_n
    eta = (1.0 - (2.0 / size) ** (1.0 - theta)) / (1.0 - zeta(2, theta) / zeta_n)
    # rank = int(size * (eta * u - eta + 1) ** alpha) < ranks  <=>  u < 1 - (1 - (ranks / size) ** (1 - theta)) / eta
    return 1.0 - (1.0 - (ranks / size) ** (1.0 - theta)) / eta


@lru_cache(maxsize=64)
def zeta(n: int, theta: float) -> float:
    """The generalized harmonic number sum(1 / i**theta, i = 1..n), once per size and theta.

    Exact up to ``EXACT_ZETA_TERMS`` terms; beyond, the rest by Euler-Maclaurin (the integral, half the end terms and
    the first derivative's correction), whose error at 100,000 terms is below 1e-15 of the sum.
    """
    terms = min(n, EXACT_ZETA_TERMS)
    total = math.fsum(i**-theta for i in range(1, terms + 1))
    if n <= terms:
        return total
    m = float(terms)
    integral = (n ** (1.0 - theta) - m ** (1.0 - theta)) / (1.0 - theta)
    ends = (n**-theta - m**-theta) / 2.0
    derivative = -theta * (n ** (-theta - 1.0) - m ** (-theta - 1.0)) / 12.0
    return total + integral + ends + derivative


def fnv1a_64(value: int) -> int:
    """FNV-1a over the value's 8 big-endian bytes, as a non-negative int64 (YCSB's Utils.fnvhash64 / go-ycsb Hash64)."""
    digest = _FNV_OFFSET
    for byte in (value & _MASK).to_bytes(8, "big"):
        digest = ((digest ^ byte) * _FNV_PRIME) & _MASK
    if digest >= 1 << 63:  # as int64, then its absolute value
        digest = (1 << 64) - digest
    return digest
