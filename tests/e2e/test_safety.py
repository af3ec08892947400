"""The tool touches only its prefix: neighbours of the prefix survive a run and its clean-up byte for byte, a used
prefix is refused, a prefix that covers everything is refused, and a custom user cannot write outside it."""

from __future__ import annotations

import re

import pytest
from certs import etcd_client
from checks import assert_no_traceback, refusal_line, stats_rows
from support import HEADLESS, headless_args, read_csv_rows, run_locust

from etcd_users.cluster import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PREFIX = b"/locust-etcd/"
# keys that sort right around the prefix's range [/locust-etcd/, /locust-etcd0), and far from it
NEIGHBOURS = {
    b"/locust-etcd": b"the prefix without its slash",
    b"/locust-etcd0": bytes(range(256)),  # the range end itself: the first key after the prefix
    b"/locust-etcd.": b"\x00\xff\x00",  # '.' sorts just before '/'
    b"/locust-etcd\x00": b"sorts just before the prefix's first key",
    b"/locust-etcd0/deeper": b"under the range end",
    b"/locust-etcc\xff": b"just before the prefix",
    b"/a": b"a",
    b"/z": b"z" * 5000,
    b"\x00": b"the lowest key",
    b"\xff\xff": b"\xff" * 10,
}


def snapshot(client) -> dict[bytes, tuple[bytes, int, int, int]]:
    """Every key with its value and revisions: an untouched key keeps its mod_revision."""
    return {m.key: (value, m.create_revision, m.mod_revision, m.version) for value, m in client.get_all()}


def prefix_count(client) -> int:
    return client.get_prefix_response(PREFIX, count_only=True).count


def run(cluster: LocalCluster, out, *args: str, locustfile: str = "locustfile.py", users: int = 4, seconds: int = 2):
    command = headless_args(cluster, out / "run", *args, users=users, seconds=seconds)
    command[1] = locustfile
    return run_locust(*command, timeout=90)


def test_neighbours_of_the_prefix_survive_a_run_and_its_cleanup(fresh_etcd1, tmp_out):
    client = etcd_client(fresh_etcd1.endpoints[0])
    for key, value in NEIGHBOURS.items():
        client.put(key, value)
    before = snapshot(client)
    assert set(before) == set(NEIGHBOURS)

    result = run(fresh_etcd1, tmp_out, "EtcdPutUser", "--etcd-key-space-size", "200", "--etcd-cleanup")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    puts = int(stats_rows(tmp_out / "run")["put"]["Request Count"])
    deleted = int(re.search(r"deleted (\d+) keys under '/locust-etcd/'", result.stderr).group(1))
    assert puts > 0 and 0 < deleted <= 200

    assert prefix_count(client) == 0
    assert snapshot(client) == before


def test_a_prefix_in_use_is_refused_unless_allowed(fresh_etcd1, tmp_out):
    client = etcd_client(fresh_etcd1.endpoints[0])
    client.put(PREFIX + b"existing", b"keep me")
    before = snapshot(client)

    line = refusal_line(run(fresh_etcd1, tmp_out, "EtcdPutUser"))
    assert "--etcd-prefix: '/locust-etcd/' already holds 1 keys" in line
    assert "--etcd-allow-existing" in line
    assert snapshot(client) == before

    result = run(fresh_etcd1, tmp_out, "EtcdPutUser", "--etcd-allow-existing", "--etcd-key-space-size", "100")
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(stats_rows(tmp_out / "run")["put"]["Request Count"]) > 0
    # the run writes its own key space; the key it found stays as it was
    assert snapshot(client)[PREFIX + b"existing"] == before[PREFIX + b"existing"]


@pytest.mark.parametrize("prefix", ["/", "", "//"])
def test_a_prefix_covering_every_key_is_refused(prefix):
    args = ("-u", "1", "-t", "1s", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", prefix)
    line = refusal_line(run_locust(*HEADLESS, *args, "EtcdPutUser", timeout=60))
    assert line.startswith(f"locust-etcd: error: --etcd-prefix: {prefix!r} would cover the whole key space")


@pytest.mark.parametrize(
    "user_class, refused_write",
    [
        ("PutOutsideUser", "b'/outside' is outside --etcd-prefix '/locust-etcd/'"),
        # the key is under the prefix, the end of the range is not: the message names the range
        ("DeletePastPrefixUser", "[b'/locust-etcd/a', b'/z') is outside --etcd-prefix '/locust-etcd/'"),
        ("NestedTxnPutUser", "b'/nested' is outside --etcd-prefix '/locust-etcd/'"),
    ],
    ids=["put", "delete-range", "nested-txn"],
)
def test_a_custom_user_cannot_write_outside_the_prefix(fresh_etcd1, tmp_out, user_class, refused_write):
    client = etcd_client(fresh_etcd1.endpoints[0])
    for key, value in NEIGHBOURS.items():
        client.put(key, value)
    before = snapshot(client)

    locustfile = "tests/locustfiles/outside_prefix.py"
    result = run(fresh_etcd1, tmp_out, user_class, locustfile=locustfile, users=1, seconds=1)
    # a bug in the locustfile, not an etcd failure: raised into the task, which Locust reports as an exception
    # (exit code 1) with the traceback through the user's own line
    assert result.returncode == 1, result.stderr[-3000:]
    exceptions = read_csv_rows(tmp_out / "run_exceptions.csv")
    assert exceptions, result.stderr[-3000:]
    for row in exceptions:
        assert row["Message"].startswith(refused_write), row["Message"]
        assert "KeyOutsidePrefixError" in row["Traceback"] and "outside_prefix.py" in row["Traceback"]
    assert stats_rows(tmp_out / "run") == {}  # nothing was sent to etcd
    assert snapshot(client) == before
