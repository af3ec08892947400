"""YCSB's core workloads: each preset's operation shares over 100,000 draws, its key distribution, scan lengths, the
key space that inserts grow, and the option's bad input."""

from __future__ import annotations

import argparse
import random
from collections import Counter

import pytest

from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.workload_model.keys import KeySpace
from etcd_users.workload_model.ycsb import (
    MAX_SCAN_LENGTH,
    WORKLOADS,
    chooser,
    parse_workload,
    request_name,
    scan_lengths,
)

DRAWS = 100_000
# YCSB's workload files: readproportion, updateproportion, insertproportion, scanproportion,
# readmodifywriteproportion, requestdistribution
EXPECTED = {
    "A": ({"read": 0.5, "update": 0.5}, "zipfian"),
    "B": ({"read": 0.95, "update": 0.05}, "zipfian"),
    "C": ({"read": 1.0}, "zipfian"),
    "D": ({"read": 0.95, "insert": 0.05}, "latest"),
    "E": ({"scan": 0.95, "insert": 0.05}, "zipfian"),
    "F": ({"read": 0.5, "rmw": 0.5}, "zipfian"),
}


@pytest.mark.parametrize("letter", sorted(EXPECTED))
def test_each_workload_draws_its_operations_in_ycsbs_proportions(letter):
    shares, distribution = EXPECTED[letter]
    workload = WORKLOADS[letter]
    assert workload.distribution.kind == distribution
    choose = chooser(workload, random.Random(7).random)
    counts = Counter(choose() for _ in range(DRAWS))
    assert set(counts) == set(shares)
    for operation, share in shares.items():
        # five standard deviations of a binomial share: never by chance
        tolerance = 5 * (share * (1 - share) / DRAWS) ** 0.5
        assert abs(counts[operation] / DRAWS - share) <= tolerance, (operation, counts)


def test_scans_are_1_to_100_keys_uniformly():
    length = scan_lengths(random.Random(3).random)
    lengths = Counter(length() for _ in range(DRAWS))
    assert min(lengths) == 1 and max(lengths) == MAX_SCAN_LENGTH == 100
    assert all(abs(count / DRAWS - 0.01) < 0.003 for count in lengths.values())


def test_the_option_takes_a_letter_in_any_case_and_sets_the_key_distribution():
    assert parse_workload("a") is WORKLOADS["A"] and parse_workload("workloadE") is WORKLOADS["E"]
    assert parse_workload("") is None
    assert request_name("rmw") == "ycsb/rmw"
    settings = settings_from_options(argparse.Namespace(etcd_ycsb="d"))
    assert settings.ycsb is WORKLOADS["D"] and settings.distribution.kind == "latest"
    # another distribution asked for wins over the workload's
    other = settings_from_options(argparse.Namespace(etcd_ycsb="A", etcd_key_distribution="hotspot"))
    assert other.distribution.kind == "hotspot"
    assert settings_from_options(argparse.Namespace()).distribution.kind == "uniform"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"etcd_ycsb": "G"}, "--etcd-ycsb: 'G' is not one of YCSB's core workloads; give one of A, B, C, D, E, F"),
        (
            {"etcd_ycsb": "D", "etcd_key_size": 17, "etcd_key_space_size": 1000},
            "--etcd-key-size: 17 leaves no room for the keys YCSB D's inserts add after the 1000 loaded records; use "
            "at least 18 or a shorter --etcd-prefix",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_option(options, message):
    with pytest.raises(SettingsError) as caught:
        settings_from_options(argparse.Namespace(**options))
    assert str(caught.value) == message


def test_inserts_grow_the_key_space_and_latest_reads_follow_them():
    size = 1000
    keys = KeySpace(EtcdSettings.defaults(ycsb=WORKLOADS["D"], key_space_size=size))
    assert keys.distribution.kind == "latest"
    first = keys.new_index()
    assert first == size and keys.new_index() == size + 1
    # not acknowledged yet: reads stay among the loaded keys
    assert all(keys.next_index() < size for _ in range(1000))
    keys.inserted(first)
    keys.inserted(first + 1)
    reads = Counter(keys.next_index() for _ in range(DRAWS))
    assert min(reads) >= 2 and max(reads) == size + 1  # a window of `size` keys back from the newest
    assert reads.most_common(1)[0][0] == size + 1  # the newest key is the hottest
    assert keys.key(size + 1).endswith(b"1001") and len(keys.key(size + 1)) == len(keys.key(0))


def test_scans_cover_consecutive_keys_and_end_at_the_newest_key():
    size = 1000
    keys = KeySpace(EtcdSettings.defaults(ycsb=WORKLOADS["E"], key_space_size=size))
    for _ in range(2000):
        start, end = keys.scan_of(100)
        assert keys.key(0) <= start and end <= keys.key(size - 1) + b"\0"
        assert int(end[len(keys.prefix) :].rstrip(b"\0")) - int(start[len(keys.prefix) :]) == 99
    keys.inserted(keys.new_index())
    assert max(keys.scan_of(100)[1] for _ in range(5000)) == keys.key(size) + b"\0"
