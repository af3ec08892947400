"""The keys members hold differently (``etcd_users.features.audit.divergence.differing_keys``) and the audit's line of
them."""

from etcd_users.features.audit import divergence
from etcd_users.features.audit.divergence import differing_keys
from etcd_users.features.audit.verdict import held_differently_line


def test_keys_differ_by_presence_or_version_not_by_mod_revision_alone():
    a = {b"/p/1": (1, 10), b"/p/2": (3, 30), b"/p/3": (1, 12)}
    b = {b"/p/1": (1, 11), b"/p/2": (2, 31), b"/p/4": (1, 40)}  # /p/1's revisions shifted by one: not a difference
    keys, differing = differing_keys({"http://a": a, "http://b": b, "http://c": "DEADLINE_EXCEEDED"})
    assert differing == 3
    assert [item["key"] for item in keys] == ["/p/2", "/p/3", "/p/4"]  # in key order; the member in error left out
    assert keys[0]["members"] == {
        "http://a": {"version": 3, "mod_revision": 30},
        "http://b": {"version": 2, "mod_revision": 31},
    }
    assert keys[1]["members"]["http://b"] is None and keys[2]["members"]["http://a"] is None


def test_one_listing_compares_with_nothing_and_the_kept_keys_are_capped(monkeypatch):
    assert differing_keys({"http://a": {b"/p/1": (1, 1)}, "http://b": "UNAVAILABLE"}) == ([], 0)
    monkeypatch.setattr(divergence, "DIFFERING_KEYS_KEPT", 2)
    keys, differing = differing_keys({"http://a": {b"/p/%d" % i: (1, i) for i in range(5)}, "http://b": {}})
    assert differing == 5 and len(keys) == 2


def test_the_audit_line_names_the_counts_and_the_first_key():
    held = {
        "prefix": "/p/",
        "keys_held": {"http://a": 3, "http://b": 2, "http://c": "UNAVAILABLE"},
        "differing": 1,
        "keys": [{"key": "/p/3", "members": {"http://a": {"version": 1, "mod_revision": 12}, "http://b": None}}],
    }
    assert held_differently_line(held) == (
        "1 key under /p/ held differently by the members (http://a: 3 keys, http://b: 2 keys, http://c: UNAVAILABLE); "
        "the first: /p/3 (http://a: version 1, http://b: absent)"
    )


def test_a_long_key_is_shown_by_its_two_ends_in_the_line():
    key = "/locust-etcd/" + "0" * 251 + "8826"  # the key space pads its keys to --etcd-key-size
    held = {
        "prefix": "/locust-etcd/",
        "keys_held": {"http://a": 1, "http://b": 1},
        "differing": 1,
        "keys": [{"key": key, "members": {"http://a": {"version": 44}, "http://b": {"version": 43}}}],
    }
    assert held_differently_line(held).endswith(
        "; the first: /locust-etcd/00000000000000000…00000000000000008826 (268 characters) (http://a: version 44, "
        "http://b: version 43)"
    )
