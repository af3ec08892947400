"""Traffic that looks like production: skewed keys, ranges over many keys and Poisson arrivals, on a real etcd."""

from __future__ import annotations

import json
import urllib.parse

import etcd3
import pytest
from checks import assert_no_traceback, stats_rows
from support import headless_args, run_locust

from etcd_users.workload_model.distributions import fnv1a_64, parse_key_distribution

pytestmark = pytest.mark.e2e

KEY_SIZE = 32


def client_of(cluster) -> etcd3.Etcd3Client:
    address = urllib.parse.urlsplit(cluster.endpoints[0])
    return etcd3.client(address.hostname, address.port, timeout=10)


def run(cluster, csv_prefix, *args: str, users: int = 4, seconds: int = 3):
    result = run_locust(*headless_args(cluster, csv_prefix, "--etcd-key-size", str(KEY_SIZE), *args, users=users,
                                       seconds=seconds))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stderr)
    return result, stats_rows(csv_prefix)


@pytest.mark.slow
def test_zipfian_puts_concentrate_on_the_hottest_keys_as_theory_says(etcd1, tmp_out):
    key_prefix, size = "/traffic-zipfian/", 1000
    distribution = parse_key_distribution("zipfian")
    theory = distribution.hottest_share(size)
    client = client_of(etcd1)
    try:
        args = ("--etcd-prefix", key_prefix, "--etcd-key-space-size", str(size), "--etcd-val-size", "16")
        result, rows = run(etcd1, tmp_out / "zipfian", *args, "--etcd-key-distribution", "zipfian", "EtcdPutUser")
        assert f"keys drawn zipfian:0.99: {100 * theory:.1f}% of the requests to the hottest 1% of the 1000 keys" in (
            result.stderr
        )
        # each key's version is how many times the run wrote it
        versions = {key.decode(): meta.version for _, meta in client.get_prefix(key_prefix) for key in [meta.key]}
    finally:
        client.delete_prefix(key_prefix)
        client.close()
    written = sum(versions.values())
    # Locust's final CSV may miss the last requests; etcd has them all
    assert written >= int(rows["put"]["Request Count"]) - int(rows["put"]["Failure Count"]) > 0
    width = KEY_SIZE - len(key_prefix)
    hottest = {f"{key_prefix}{fnv1a_64(rank) % size:0{width}d}" for rank in range(size // 100)}
    share = sum(versions.get(key, 0) for key in hottest) / written
    # chance: a few standard deviations of the run's own number of writes; above: another rank hashed onto a hot key
    chance = 4 * (theory * (1 - theory) / written) ** 0.5
    assert theory - chance <= share <= theory + chance + 0.02, (share, theory, written)
    assert max(versions, key=versions.get) == f"{key_prefix}{fnv1a_64(0) % size:0{width}d}"
    assert share > 0.1  # ten times a uniform draw's 1 %
    # the run counted the same from the keys' versions at its stop (a put still in flight then may land after)
    counted = json.loads((tmp_out / "zipfian_skew.json").read_text())
    assert 0.99 * written <= counted["writes"] <= written and counted["hottest_keys"] == 10
    assert counted["hottest_share"] == pytest.approx(share, abs=0.01)
    assert f"{100 * counted['hottest_share']:.1f}% of them to the hottest 1% (10 keys) of the 1000" in result.stderr
    assert f"key skew: {counted['writes']} puts by etcd's count (the keys' versions, not Locust's requests)" in (
        result.stderr
    )


@pytest.mark.slow
def test_a_range_over_1000_keys_returns_them_and_reports_their_bytes(etcd1, tmp_out):
    val_size = 100
    common = ("--etcd-prefix", "/traffic-range/", "--etcd-key-space-size", "2000", "--etcd-val-size", str(val_size))
    common += ("--etcd-cleanup", "--etcd-range-keys", "1000")
    _, rows = run(etcd1, tmp_out / "keys", *common, "EtcdRangeUser", users=2, seconds=2)
    assert set(rows) == {"range/1000 keys/linearizable"}
    row = rows["range/1000 keys/linearizable"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0
    # 1,000 keys and values, each with its revisions and version: a little more than their bytes
    assert 1000 * (KEY_SIZE + val_size) < float(row["Average Content Size"]) < 1000 * (KEY_SIZE + val_size + 40)
    _, rows = run(etcd1, tmp_out / "count", *common, "--etcd-range-count-only", "EtcdRangeUser", users=2, seconds=2)
    row = rows["range/1000 keys/count-only/linearizable"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0
    assert float(row["Average Content Size"]) < 100  # the header and the count alone


@pytest.mark.slow
def test_poisson_arrivals_keep_the_mean_rate(etcd1, tmp_out):
    users, rate, seconds = 2, 25, 4
    args = ("--etcd-prefix", "/traffic-poisson/", "--etcd-cleanup", "--etcd-user-rate", str(rate))
    _, rows = run(etcd1, tmp_out / "poisson", *args, "--etcd-arrival", "poisson", "EtcdPutUser", users=users,
                  seconds=seconds)  # fmt: skip
    count = int(rows["put"]["Request Count"])
    expected = users * rate * seconds
    assert 0.6 * expected <= count <= 1.3 * expected, (count, expected)
    assert int(rows["put"]["Failure Count"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["loop", "greenlet"])
def test_a_paged_list_reads_the_key_space_in_pages_and_reports_each_list(etcd1, tmp_out, engine):
    val_size = 100
    args = ("--etcd-prefix", f"/traffic-pages-{engine}/", "--etcd-key-space-size", "1200", "--etcd-engine", engine)
    args += ("--etcd-val-size", str(val_size))
    # users finish the list they are in when the run ends, so that every list counts its three pages
    args += ("--etcd-cleanup", "--etcd-range-paginate", "--etcd-range-limit", "500", "--stop-timeout", "10")
    _, rows = run(etcd1, tmp_out / "pages", *args, "EtcdRangeUser", users=2, seconds=2)
    assert set(rows) == {"range/page 500/linearizable", "range/list 500/linearizable"}
    pages, lists = rows["range/page 500/linearizable"], rows["range/list 500/linearizable"]
    assert int(pages["Failure Count"]) == int(lists["Failure Count"]) == 0
    # 1,200 keys in pages of 500: 500, 500 and 200
    assert int(pages["Request Count"]) == 3 * int(lists["Request Count"]) > 0
    # each list moves the 1,200 keys and values, with their revisions and versions and three headers
    assert 1200 * (KEY_SIZE + val_size) < float(lists["Average Content Size"]) < 1200 * (KEY_SIZE + val_size + 40)
