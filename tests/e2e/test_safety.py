"""The tool touches only its prefix: neighbours of the prefix survive a run and its clean-up byte for byte, a used
prefix is refused, a prefix that covers everything is refused, and a custom user cannot write outside it."""

from __future__ import annotations

import re

import pytest
from certs import etcd_client
from checks import assert_no_traceback, refusal_line, stats_rows
from support import HEADLESS, headless_args, read_csv_rows, run_locust

from etcd_users.local import LocalCluster

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
    assert "--etcd-prefix: '/locust-etcd/' already holds 1 key;" in line
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


# -- a prefix is a directory: nothing of a neighbour that shares its first characters is counted, written or deleted

BOUNDARY_PREFIX = b"/nb/"
# keys that share every leading character with the prefix but its '/', or sort right around its range
# [/nb/, /nb0): what etcd's prefix range of /nb (no slash) would have counted and deleted
BOUNDARY_NEIGHBOURS = {
    b"/nb": b"the prefix without its slash",
    b"/nb0": bytes(range(256)),  # the range end itself
    b"/nb0/deeper": b"under the range end",
    b"/nb-sentinel": b"another application's",
    b"/nb.x": b"\x00\xff\x00",
    b"/nb.": b"'.' sorts just before '/'",
    b"/nb\xff": b"\xff" * 3,
    b"/nb\x00": b"",
    b"/nb-\xff\xff\xff": b"v",
    b"/nb__preflight__/0000": b"where the burst wrote under the prefix /nb",
    b"/nb__write_check__": b"where the write check put under the prefix /nb",
    b"/na/zzz": b"the directory before",
    b"/nc": b"c",
    b"/nc/": b"the directory after",
    b"/n": b"n",
    b"/locust-etcd/x": b"the default prefix, untouched",
    b"\x00": b"the lowest key",
    b"\xff\xff": b"\xff" * 10,
}
# keys of an earlier run (or anyone's) inside the prefix: --etcd-allow-existing runs among them, --etcd-cleanup
# deletes them with the rest
BOUNDARY_INSIDE = {
    b"/nb/": b"the prefix itself is a key under it",
    b"/nb/a": b"a",
    b"/nb//x": b"x",
    b"/nb/\xff\xff": b"\xff",
    b"/nb/" + b"0" * 252: b"the run's own first key (key size 256, key space 200)",
}


def test_a_run_and_its_cleanup_never_touch_keys_beside_the_prefix(fresh_etcd1, tmp_out):
    client = etcd_client(fresh_etcd1.endpoints[0])
    for key, value in {**BOUNDARY_NEIGHBOURS, **BOUNDARY_INSIDE}.items():
        client.put(key, value)
    before = snapshot(client)
    assert set(before) == set(BOUNDARY_NEIGHBOURS) | set(BOUNDARY_INSIDE)

    # the refusal counts what the tool would delete, and suggests deleting only that
    refused = refusal_line(run(fresh_etcd1, tmp_out, "EtcdPutUser", "--etcd-prefix", "/nb/"))
    assert refused == (
        f"locust-etcd: error: --etcd-prefix: '/nb/' already holds {len(BOUNDARY_INSIDE)} keys; pass "
        "--etcd-allow-existing to run among them, choose another --etcd-prefix, or delete them "
        "(etcdctl del --prefix /nb/)"
    )
    assert snapshot(client) == before

    mix = "put:1,range:1,delete:1,txn-put:1"
    args = ("--etcd-prefix", "/nb/", "--etcd-allow-existing", "--etcd-cleanup", "--etcd-key-space-size", "200")
    result = run(fresh_etcd1, tmp_out, "EtcdMixedUser", *args, "--etcd-mix", mix, "--etcd-txn-ops", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    rows = stats_rows(tmp_out / "run")
    for name in ("put", "range/linearizable", "delete", "txn-put"):
        assert int(rows[name]["Request Count"]) > 0 and int(rows[name]["Failure Count"]) == 0, (name, rows[name])
    deleted = int(re.search(r"deleted (\d+) keys under '/nb/'", result.stderr).group(1))
    assert deleted >= len(BOUNDARY_INSIDE) - 1  # the run's own first key may have been deleted by a delete

    after = snapshot(client)
    assert client.get_prefix_response(BOUNDARY_PREFIX, count_only=True).count == 0
    assert set(after) == set(BOUNDARY_NEIGHBOURS)  # nothing left inside, nothing new outside
    for key in BOUNDARY_NEIGHBOURS:  # key, value and revisions: never rewritten, not even with the same bytes
        assert after[key] == before[key], key


@pytest.mark.parametrize("prefix", ["/locust-etcd", "/nb", "/reg"])
def test_a_prefix_that_is_not_a_directory_is_refused(prefix):
    args = ("-u", "1", "-t", "1s", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", prefix)
    line = refusal_line(run_locust(*HEADLESS, *args, "EtcdPutUser", timeout=60))
    assert line == (
        f"locust-etcd: error: --etcd-prefix: {prefix!r} does not end in '/', and etcd's prefix range of {prefix!r} "
        f"also covers other applications' keys such as '{prefix}-sentinel'; give '{prefix}/'"
    )


# -- a value that parses but means nothing ends the run at start, in one line ---------------------------------------

NOT_UTF8 = b"/nb\xff/".decode(errors="surrogateescape")  # a subprocess argument of the bytes /nb\xff/

BAD_VALUES = [
    # a thousand tracebacks
    pytest.param(("--etcd-user-rate", "nan"), "--etcd-user-rate: nan is not a finite number", id="nan-rate"),
    # "no etcd endpoint answered within nans"
    pytest.param(("--etcd-timeout", "inf"), "--etcd-timeout: inf is not a finite number", id="inf-timeout"),
    # thousands of IndexErrors and no request
    pytest.param(("--etcd-mix", "put:nan,range:1"), "--etcd-mix: 'put:nan' is not NAME:WEIGHT", id="nan-mix"),
    # 25 s, 7.9 GB RSS, nothing sent, exit 0
    pytest.param(("--etcd-val-size", "2000000000"), "etcd's --max-request-bytes, 1.5 MiB by default", id="huge-value"),
    pytest.param(("--etcd-endpoints", "http://[::1"), "--etcd-endpoints: 'http://[::1' is not a client URL", id="ipv6"),
    pytest.param(("--etcd-prefix", NOT_UTF8), "--etcd-prefix: '/nb\\udcff/' is not UTF-8 text", id="not-utf8"),
    pytest.param(("--etcd-sla", "p99<" + "9" * 20000 + "ms"), "--etcd-sla: 'p99<999", id="20kB-gate"),
]


@pytest.mark.parametrize("args, expected", BAD_VALUES)
def test_a_bad_value_ends_the_run_at_start_in_one_line(args, expected):
    endpoints = ("--etcd-endpoints", "http://127.0.0.1:1")
    result = run_locust(*HEADLESS, "-u", "1", "-t", "5s", *endpoints, *args, "EtcdMixedUser", timeout=60)
    line = refusal_line(result)
    assert expected in line, line
    assert len(line) < 500, line  # long input shortened


def test_an_endpoint_list_of_empty_entries_is_refused_and_starts_no_local_etcd():
    # "," used to mean "no endpoints": a throwaway local etcd benchmarked instead of the cluster the script meant
    result = run_locust(*HEADLESS, "-u", "1", "-t", "5s", "--etcd-endpoints", ",", "EtcdPutUser", timeout=60)
    line = refusal_line(result)
    assert line == (
        "locust-etcd: error: --etcd-endpoints: ',' has an empty entry; give client URLs separated by single commas, "
        "or nothing at all for a throwaway local etcd"
    )
    assert "local etcd (" not in result.stderr  # "started a local etcd (1 member): …"


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
