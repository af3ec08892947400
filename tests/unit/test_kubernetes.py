"""The Kubernetes workload's pure parts (``etcd_users.features.kubernetes.layout``, the ``--etcd-k8s-*`` parsers):
kube-apiserver's key layout under the prefix, the mixes, the objects a process knows, the values,
the watch events matched to the writes."""

import argparse
import random
import re
from collections import Counter

import pytest

from etcd_users.core.declare import parse_weights
from etcd_users.core.features import OPTIONS
from etcd_users.features.kubernetes.layout import (
    NODE_LEASE_BYTES,
    Layout,
    ObjectPool,
    Resource,
    ValueSource,
    WeightedChoice,
    choose_write,
    pages,
    spread_schedule,
)
from etcd_users.features.kubernetes.options import (
    K8S_READS,
    K8S_WRITES,
    KubeSettings,
    parse_k8s_object_size,
    parse_k8s_objects,
)
from etcd_users.features.kubernetes.run import may_compact, wanted_keys
from etcd_users.run_state.watch_latencies import WatchLatencies
from etcd_users.settings import SettingsError, settings_from_options


def options(**overrides) -> argparse.Namespace:
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    for dest, value in overrides.items():
        assert hasattr(namespace, dest), dest
        setattr(namespace, dest, value)
    return namespace


def seeded(seed: int = 7):
    return random.Random(seed).random


# -- options --


def test_the_defaults_are_the_robustness_profile():
    k8s = settings_from_options(options()).k8s
    assert k8s == KubeSettings.defaults()
    assert k8s.objects == (("pods", 5000), ("configmaps", 1000), ("leases", 200))
    assert dict(k8s.read_mix) == {"get": 5, "get-stale": 2, "get-at-rev": 8, "list-stale": 5, "list-and-watch": 80}
    assert dict(k8s.write_mix) == {"update": 90, "delete": 5, "create": 5}
    assert (k8s.page_size, k8s.object_size, k8s.lease_period, k8s.compact_interval) == (500, (2048, 8192), 10.0, 300)
    assert not k8s.compact_allowed


def test_given_values_reach_the_settings():
    k8s = settings_from_options(
        options(
            etcd_k8s_objects="pods:3, secrets:7",
            etcd_k8s_namespaces=2,
            etcd_k8s_object_size="4096",
            etcd_k8s_page_size=2,
            etcd_k8s_read_mix="count:1,get:0",
            etcd_k8s_write_mix="create:1",
            etcd_k8s_rw_ratio=0.0,
            etcd_k8s_nodes=5000,
            etcd_k8s_lease_period=2.5,
            etcd_k8s_compact_interval=0.0,
            etcd_k8s_compact_allowed=True,
            etcd_k8s_prefill_seconds=30.0,
        )
    ).k8s
    assert k8s.objects == (("pods", 3), ("secrets", 7))
    assert k8s.object_size == (4096, 4096)
    assert k8s.read_mix == (("count", 1.0), ("get", 0.0))
    assert (k8s.namespaces, k8s.page_size, k8s.rw_ratio, k8s.nodes, k8s.lease_period) == (2, 2, 0.0, 5000, 2.5)
    assert (k8s.compact_interval, k8s.compact_allowed, k8s.prefill_seconds) == (0.0, True, 30.0)


def test_parsers():
    assert parse_k8s_objects("leases:1") == (("leases", 1),)
    assert parse_k8s_object_size("1:2") == (1, 2)
    assert parse_k8s_object_size(" 0 ") == (0, 0)
    assert parse_weights("--x", "update:1,delete:0", K8S_WRITES, "e") == (("update", 1.0), ("delete", 0.0))
    assert set(K8S_READS) == {"get", "get-stale", "get-at-rev", "list-stale", "list-and-watch", "count"}
    with pytest.raises(SettingsError, match=r"^--etcd-k8s-objects: give at least one"):
        parse_k8s_objects("")


def test_the_largest_object_must_fit_in_one_request_with_its_key():
    fits = settings_from_options(options(etcd_k8s_object_size="1000:1500000")).k8s
    assert fits.object_size == (1000, 1500000)
    with pytest.raises(SettingsError, match="^--etcd-k8s-object-size: objects of 1572400 bytes"):
        settings_from_options(options(etcd_k8s_object_size="1572400"))


# -- the key layout --


def test_keys_are_prefix_resource_namespace_name():
    layout = Layout(b"/locust-etcd/", KubeSettings.defaults(objects=(("pods", 12), ("configmaps", 1)), namespaces=5))
    pods, configmaps = layout.resources
    assert pods.key(0) == b"/locust-etcd/pods/ns-0000/pods-000000"
    assert pods.key(7) == b"/locust-etcd/pods/ns-0002/pods-000007"
    assert configmaps.key(1234567) == b"/locust-etcd/configmaps/ns-0002/configmaps-1234567"
    assert (pods.prefix, pods.range_end) == (b"/locust-etcd/pods/", b"/locust-etcd/pods0")
    assert len(list(pods.keys())) == 12 and len(set(pods.keys())) == 12
    assert Counter(key.split(b"/")[3] for key in pods.keys()) == {b"ns-%04d" % n: (3 if n < 2 else 2) for n in range(5)}
    assert layout.node_key(42) == b"/locust-etcd/leases/kube-node-lease/node-000042"


def test_the_registry_prefix_gives_kube_apiservers_layout():
    layout = Layout(b"/registry/", KubeSettings.defaults(objects=(("leases", 3),), nodes=2))
    [leases] = layout.resources
    assert leases.key(1) == b"/registry/leases/ns-0001/leases-000001"
    assert list(layout.node_keys()) == [
        b"/registry/leases/kube-node-lease/node-000000",
        b"/registry/leases/kube-node-lease/node-000001",
    ]
    # the nodes' leases are under the resource's prefix (a list of leases shows them) but not the workload's objects
    assert layout.node_key(0).startswith(leases.prefix) and not leases.owns(layout.node_key(0))
    assert leases.owns(leases.key(5))


def test_every_key_stays_under_the_prefix_and_within_the_size_checked():
    k8s = settings_from_options(options(etcd_k8s_objects="pods:5000,verylongresourcename:999999")).k8s
    layout = Layout(b"/locust-etcd/", k8s)
    for resource in layout.resources:
        for key in (resource.key(0), resource.key(resource.count * 10)):
            assert key.startswith(b"/locust-etcd/")
            assert len(key) <= len(b"/locust-etcd/") + 2 * len(resource.name) + len(str(resource.count)) + 16


def test_what_a_run_writes_first():
    layout = Layout(b"/p/", KubeSettings.defaults(objects=(("pods", 2),), nodes=3))
    assert [len(keys) for _, _, keys, _ in wanted_keys(layout, {"objects"})] == [2]
    [(prefix, end, keys, size)] = wanted_keys(layout, {"nodes"})
    assert (prefix, end, len(keys), size) == (b"/p/leases/kube-node-lease/", b"/p/leases/kube-node-lease0", 3, 300)
    assert wanted_keys(layout, set()) == []


# -- the mixes --


def test_a_weighted_choice_follows_the_weights():
    choose = WeightedChoice(KubeSettings.defaults().read_mix, seeded())
    drawn = Counter(choose() for _ in range(100_000))
    assert set(drawn) == {"get", "get-stale", "get-at-rev", "list-stale", "list-and-watch"}
    for name, weight in KubeSettings.defaults().read_mix:
        assert abs(drawn[name] / 1000 - weight) < 1.0, (name, drawn[name])
    assert WeightedChoice([("a", 0.0), ("b", 2.0)], seeded())() == "b"
    assert WeightedChoice([("a", 1.0)], lambda: 0.9999999999999999)() == "a"
    with pytest.raises(ValueError):
        WeightedChoice([("a", 0.0)])


def test_writes_keep_the_object_count_near_its_target():
    resource = Resource(b"/p/", "pods", 10, 1)
    pool = ObjectPool.from_listing(resource, [])
    mix = WeightedChoice(KubeSettings.defaults().write_mix, seeded())
    assert choose_write(pool, mix) == "create"  # empty
    for index in range(4):
        pool.seen(resource.key(index), 1)
    assert choose_write(pool, mix) == "create"  # under half
    for index in range(4, 16):
        pool.seen(resource.key(index), 1)
    assert choose_write(pool, mix) == "delete"  # over 1.5 times
    for index in range(10, 16):
        pool.gone(resource.key(index))
    drawn = Counter(choose_write(pool, mix) for _ in range(10_000))
    assert 8500 < drawn["update"] < 9500 and drawn["create"] > 300 and drawn["delete"] > 300


# -- the objects a process knows --


def test_a_pool_starts_from_a_listing_and_follows_the_writes():
    resource = Resource(b"/p/", "pods", 4, 2)
    listed = [(resource.key(1), 11), (resource.key(3), 13), (b"/p/pods/kube-node-lease/node-000001", 5)]
    pool = ObjectPool.from_listing(resource, listed, seeded())
    assert len(pool) == 2 and pool.revision(resource.key(1)) == 11 and pool.revision(resource.key(0)) == 0
    assert {pool.pick() for _ in range(50)} == {(resource.key(1), 11), (resource.key(3), 13)}
    # creates make new names, as kube-apiserver's generateName: RESOURCE-xxxxx in a random namespace
    created = {pool.new_key() for _ in range(1000)}
    assert len(created) == 1000 and all(re.fullmatch(rb"/p/pods/ns-000[01]/pods-[a-z0-9]{5}", key) for key in created)
    assert {key.split(b"/")[3] for key in created} == {b"ns-0000", b"ns-0001"}
    assert all(resource.owns(key) for key in created)
    pool.seen(resource.key(0), 20)
    pool.seen(resource.key(1), 21)
    pool.gone(resource.key(3))
    pool.gone(resource.key(3))  # twice: a delete and a conflict's read that found nothing
    assert len(pool) == 2 and pool.revision(resource.key(3)) == 0
    assert {pool.pick() for _ in range(50)} == {(resource.key(0), 20), (resource.key(1), 21)}
    pool.gone(resource.key(0))
    pool.gone(resource.key(1))
    assert pool.pick() is None and len(pool) == 0


def test_values_have_the_object_size():
    values = ValueSource(2048, 8192, seeded())
    sizes = [len(values()) for _ in range(5000)]
    assert min(sizes) >= 2048 and max(sizes) <= 8192 and min(sizes) < 2300 and max(sizes) > 7900
    assert {len(ValueSource(4096, 4096)()) for _ in range(100)} == {4096}
    assert len(values.node_lease) == NODE_LEASE_BYTES


# -- watch events matched to writes --


def test_watch_events_are_timed_from_the_writes_acknowledgement():
    latencies = WatchLatencies(horizon=10.0)
    reported: list[float] = []
    latencies.acknowledged(100, 5.0, reported.append)
    latencies.arrivals.extend([(100, 5.002, b"k", False), (100, 5.004, b"k", False)])  # two watchers' events
    latencies.deliver(reported.append, now=5.01)
    assert reported == pytest.approx([0.002, 0.004])
    # an event the gevent side sees before the acknowledgement: timed when the acknowledgement comes
    latencies.arrivals.append((101, 6.003, b"k", False))
    latencies.deliver(reported.append, now=6.01)
    assert len(reported) == 2
    latencies.acknowledged(101, 6.001, reported.append)
    assert reported[2] == pytest.approx(0.002)
    # an event that overtook its acknowledgement counts as 0
    latencies.arrivals.append((102, 7.0, b"k", True))
    latencies.deliver(reported.append, now=7.0)
    latencies.acknowledged(102, 7.001, reported.append)
    assert reported[3] == 0.0


def test_events_of_other_writers_and_lost_events_are_forgotten_after_the_horizon():
    latencies = WatchLatencies(horizon=1.0)
    reported: list[float] = []
    latencies.arrivals.extend((revision, 1.0, b"k", False) for revision in range(1000))  # another worker's writes
    for revision in range(2000, 3000):
        latencies.acknowledged(revision, 1.0, reported.append)  # writes whose events never came
    latencies.deliver(reported.append, now=1.5)
    assert latencies.pending() == 2000
    latencies.deliver(reported.append, now=2.5)
    assert latencies.pending() == 0 and reported == []


# -- heartbeats and pages --


def test_node_heartbeats_are_spread_over_one_period():
    schedule = spread_schedule(4, 10.0, 100.0)
    assert schedule == [(100.0, 0), (102.5, 1), (105.0, 2), (107.5, 3)]


def test_pages_of_a_list():
    assert [pages(total, 500) for total in (0, 1, 500, 501, 5000)] == [1, 1, 1, 2, 10]


def test_compaction_needs_the_local_etcd_or_an_explicit_allowance():
    base = settings_from_options(options(etcd_endpoints="http://127.0.0.1:2379"))
    allowed = settings_from_options(options(etcd_endpoints="http://127.0.0.1:2379", etcd_k8s_compact_allowed=True))
    off = settings_from_options(options(etcd_k8s_compact_interval=0.0, etcd_k8s_compact_allowed=True))
    assert may_compact(base, local=True) and not may_compact(base, local=False)
    assert may_compact(allowed, local=False)
    assert not may_compact(off, local=True)


def test_acknowledgements_without_a_watch_stay_bounded():
    latencies = WatchLatencies(horizon=1.0)
    for revision in range(10_000):
        latencies.acknowledged(revision, revision / 1000, [].append)  # 10 s of writes, no event ever delivered
    assert latencies.pending() <= 1002


def test_watch_events_keep_the_pool_current():
    resource = Resource(b"/p/", "pods", 3, 1)
    pool = ObjectPool.from_listing(resource, [(resource.key(0), 10), (resource.key(1), 11)])
    latencies = WatchLatencies(horizon=10.0)
    latencies.arrivals.extend(
        [
            (20, 1.0, resource.key(0), False),  # another process updated it
            (21, 1.0, resource.key(1), True),  # and deleted this one
            (22, 1.0, resource.key(2), False),  # and created this one
            (5, 1.0, resource.key(0), False),  # an event older than what is known changes nothing
            (23, 1.0, b"/p/pods/kube-node-lease/node-000001", False),  # not an object of the workload
        ]
    )
    latencies.deliver([].append, now=1.0, observe=pool.observed)
    assert pool.revision(resource.key(0)) == 20 and pool.revision(resource.key(2)) == 22
    assert len(pool) == 2 and pool.revision(resource.key(1)) == 0
