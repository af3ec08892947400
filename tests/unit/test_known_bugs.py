"""The table of etcd versions with known correctness bugs."""

from etcd_users.known_bugs import known_bug_lines, known_bugs, parse_version


def test_versions_are_read_as_etcd_writes_them():
    assert parse_version("3.5.1") == parse_version("v3.5.1") == (3, 5, 1)
    assert parse_version("3.5.3-rc.0") == (3, 5, 3)
    assert parse_version("") is None and parse_version("unknown") is None


def test_the_3_5_inconsistency_covers_3_5_0_to_3_5_2_only():
    assert [bug.issue for bug in known_bugs("3.5.1")] == ["#13766", "#13514"]
    assert known_bugs("3.5.0") and known_bugs("3.5.2")
    assert not known_bugs("3.5.3") and not known_bugs("3.4.23") and not known_bugs("3.6.0")


def test_one_line_per_bug_of_each_distinct_version():
    lines = known_bug_lines(["3.5.1", "3.5.1", "", "3.4.23"])
    assert len(lines) == 2
    assert lines[0] == (
        "etcd 3.5.1 has a known bug: a member killed under load can skip an applied entry, and its data then differ "
        "from the other members' (etcd issue #13766, fixed in 3.5.3)"
    )
