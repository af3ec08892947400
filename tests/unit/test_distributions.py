"""The key distributions and the arrivals: shares and intervals against their theory, over 200,000 draws."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter

import pytest

from etcd_users.settings import EtcdSettings
from etcd_users.workload_model.arrivals import first_arrival, intervals
from etcd_users.workload_model.distributions import (
    KeyDistribution,
    counted_hottest_share,
    fnv1a_64,
    parse_key_distribution,
    writes_per_key,
    zeta,
    zipfian_ranks,
)
from etcd_users.workload_model.keys import KeySpace

DRAWS = 200_000
SIZE = 10_000


def key_space(text: str, size: int = SIZE) -> KeySpace:
    return KeySpace(EtcdSettings.defaults(key_distribution=parse_key_distribution(text), key_space_size=size))


def hottest_share(counts: Counter, size: int) -> float:
    hottest = max(1, math.ceil(size / 100))
    return sum(count for _, count in counts.most_common(hottest)) / sum(counts.values())


def test_the_parser_reads_each_distribution_and_ycsbs_defaults():
    assert parse_key_distribution("uniform") == KeyDistribution("uniform")
    assert parse_key_distribution("zipfian") == KeyDistribution("zipfian", theta=0.99)
    assert parse_key_distribution("Zipfian:0.5").theta == 0.5
    assert parse_key_distribution("latest").kind == "latest"
    assert parse_key_distribution("hotspot") == KeyDistribution("hotspot", hot_fraction=0.2, hot_ops=0.8)
    assert parse_key_distribution("hotspot:0.1:0.9") == KeyDistribution("hotspot", hot_fraction=0.1, hot_ops=0.9)


@pytest.mark.parametrize("text", ["zipfian:0", "zipfian:1.5", "zipfian:-0.5", "latest:1", "hotspot:0.2:1.5", "foo"])
def test_the_parser_refuses_what_the_draws_cannot_do(text):
    with pytest.raises(ValueError, match="give"):
        parse_key_distribution(text)


def test_the_approximate_zeta_of_a_large_key_space_is_ycsbs_constant():
    # YCSB's ScrambledZipfianGenerator hard-codes zeta(10**10, 0.99), too long a sum to make at start
    assert zeta(10**10, 0.99) == pytest.approx(26.46902820178302, rel=1e-11)
    exact = math.fsum(i**-0.8 for i in range(1, 150_001))
    assert zeta(150_000, 0.8) == pytest.approx(exact, rel=1e-13)


@pytest.mark.parametrize("theta", [0.5, 0.99])
def test_zipfian_ranks_follow_their_frequencies(theta):
    rank = zipfian_ranks(SIZE, theta, random.Random(1).random)
    counts = Counter(rank() for _ in range(DRAWS))
    assert min(counts) >= 0 and max(counts) < SIZE
    for top in (0, 1):
        expected = (top + 1) ** -theta / zeta(SIZE, theta)
        assert counts[top] / DRAWS == pytest.approx(expected, abs=0.01)
    below = sum(count for drawn, count in counts.items() if drawn < SIZE // 100)
    assert below / DRAWS == pytest.approx(KeyDistribution("zipfian", theta=theta).hottest_share(SIZE), abs=0.005)


def test_zipfian_keys_concentrate_as_theory_says_and_are_scrambled():
    keys = key_space("zipfian")
    counts = Counter(keys.next_key() for _ in range(DRAWS))
    theory = keys.distribution.hottest_share(SIZE)
    assert 0.52 < theory < 0.54
    # the keys of the hottest 1 % of ranks: another rank hashed to one of them makes it a little hotter
    hottest_keys = {keys.key(fnv1a_64(rank) % SIZE) for rank in range(SIZE // 100)}
    assert theory - 0.005 <= sum(counts[key] for key in hottest_keys) / DRAWS <= theory + 0.02
    # the hottest key is rank 0's, hashed as YCSB hashes it; the next ones are not its neighbours
    hottest = [key for key, _ in counts.most_common(3)]
    assert hottest[0] == keys.key(fnv1a_64(0) % SIZE)
    indexes = sorted(int(key[len(keys.prefix) :]) for key in hottest)
    assert indexes[1] - indexes[0] > 1 and indexes[2] - indexes[1] > 1


def test_latest_reads_draw_back_from_the_newest_write():
    keys = key_space("latest")
    assert keys.next_write_key() == keys.key(0)  # the key space was written in order: the first write wraps
    newest = [keys.next_write_key() for _ in range(500)][-1]
    counts = Counter(keys.next_key() for _ in range(DRAWS))
    assert counts.most_common(1)[0][0] == newest
    newest_index = int(newest[len(keys.prefix) :])
    recent = {keys.key((newest_index - back) % SIZE) for back in range(SIZE // 100)}
    assert sum(counts[key] for key in recent) / DRAWS == pytest.approx(keys.distribution.hottest_share(SIZE), abs=0.005)


def test_hotspot_sends_hot_ops_to_the_hot_fraction():
    keys = key_space("hotspot:0.1:0.9")
    indexes = [keys.next_index() for _ in range(DRAWS)]
    assert sum(index < SIZE // 10 for index in indexes) / DRAWS == pytest.approx(0.9, abs=0.01)
    assert keys.distribution.hottest_share(SIZE) == pytest.approx(0.09)
    assert sum(index < SIZE // 100 for index in indexes) / DRAWS == pytest.approx(0.09, abs=0.005)


def test_uniform_and_sequential_are_as_before():
    uniform = key_space("uniform")
    counts = Counter(uniform.next_key() for _ in range(DRAWS))
    assert len(counts) > SIZE * 0.99
    sequential = key_space("sequential", size=3)
    assert [sequential.next_key()[-1:] for _ in range(4)] == [b"0", b"1", b"2", b"0"]
    assert KeyDistribution("uniform").hottest_share(SIZE) == 0.01


@pytest.mark.parametrize("text", ["uniform", "zipfian", "latest", "hotspot", "sequential"])
def test_transactions_get_distinct_keys_from_every_distribution(text):
    keys = key_space(text, size=50)
    for write in (False, True):
        drawn = keys.distinct_keys(40, write=write)
        assert len(set(drawn)) == 40


def test_a_range_of_consecutive_keys_ends_inside_the_key_space():
    keys = key_space("uniform", size=100)
    for _ in range(1000):
        first, end = keys.range_of(30)
        start = int(first[len(keys.prefix) :])
        assert 0 <= start <= 70 and end == keys.key(start + 29) + b"\0"


@pytest.mark.parametrize("arrival, cv", [("poisson", 1.0), ("fixed", 0.0)])
def test_arrivals_keep_the_mean_rate_poisson_varying_as_much_as_its_mean(arrival, cv):
    rate = 50.0
    gap = intervals(arrival, rate, random.Random(2))
    gaps = [gap() for _ in range(DRAWS)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / rate, rel=0.01)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, abs=0.02)
    assert 0 <= first_arrival(arrival, rate, random.Random(3)) < 1.0


# -- the puts per key counted from etcd's keys' versions --


def test_puts_per_key_are_the_versions_difference_and_a_recreated_key_counts_from_its_new_version() -> None:
    before = {b"a": 3, b"b": 5, b"c": 9}
    after = {b"a": 7, b"b": 5, b"c": 2, b"d": 4}  # b untouched, c deleted and put twice, d new
    assert sorted(writes_per_key(before, after)) == [2, 4, 4]


def test_the_counted_share_is_the_hottest_one_percent_of_the_key_space_over_all_puts() -> None:
    writes = [50, 30] + [1] * 20  # 100 puts; 200 keys: the hottest 1 % is the 2 hottest keys
    assert counted_hottest_share(writes, 200) == pytest.approx(0.8)
    assert counted_hottest_share(writes, 50) == pytest.approx(0.5)  # at least one key
    assert counted_hottest_share([], 200) is None
