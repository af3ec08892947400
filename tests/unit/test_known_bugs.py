"""The table of etcd versions with known correctness bugs."""

import logging

from etcd_users.known_bugs import (
    DATA,
    WATCH,
    known_bug_lines,
    known_bug_names,
    known_bugs,
    parse_version,
    warn_known_bugs,
)


def test_versions_are_read_as_etcd_writes_them():
    assert parse_version("3.5.1") == parse_version("v3.5.1") == (3, 5, 1)
    assert parse_version("3.5.3-rc.0") == (3, 5, 3)
    assert parse_version("") is None and parse_version("unknown") is None


def test_the_3_5_inconsistency_covers_3_5_0_to_3_5_2_only():
    data = frozenset({DATA})
    assert [bug.issue for bug in known_bugs("3.5.1", data)] == ["#13766", "#13514"]
    assert known_bugs("3.5.0", data) and known_bugs("3.5.2", data)
    assert not known_bugs("3.5.3", data) and not known_bugs("3.4.23", data) and not known_bugs("3.6.0", data)


def test_the_progress_notification_ahead_of_events_covers_3_4_before_3_4_25_and_3_5_before_3_5_8():
    watch = frozenset({WATCH})
    for version in ("3.4.0", "3.4.23", "3.4.24", "3.5.0", "3.5.1", "3.5.7"):
        assert [bug.issue for bug in known_bugs(version, watch)] == ["#15220"], version
    for version in ("3.4.25", "3.5.8", "3.6.0"):
        assert not known_bugs(version, watch), version
    assert [bug.issue for bug in known_bugs("3.5.1")] == ["#13766", "#13514", "#15220"]


def test_one_line_per_bug_of_each_distinct_version():
    lines = known_bug_lines(["3.5.1", "3.5.1", "", "3.4.23"], frozenset({DATA}))
    assert len(lines) == 2
    assert lines[0] == (
        "etcd 3.5.1 has a known bug: a member killed under load can skip an applied entry, and its data then differ "
        "from the other members' (etcd issue #13766, fixed in 3.5.3)"
    )
    assert known_bug_names(["3.5.1", "3.4.23"], frozenset({WATCH})) == [
        "etcd 3.5.1: known bug #15220",
        "etcd 3.4.23: known bug #15220",
    ]


def test_the_pre_flight_warns_once_per_version_with_what_the_bugs_mean_for_the_run(caplog):
    with caplog.at_level(logging.WARNING, logger="etcd_users.known_bugs"):
        warn_known_bugs(["3.5.1", "3.5.1", "3.4.23", "3.5.9"])
        warn_known_bugs(["3.5.1"], restarts=True)
    assert caplog.messages == [
        "etcd 3.5.1 has known bugs: members killed or restored under load can diverge (#13766, #13514); a progress "
        "notification can come before events it says were sent (#15220); this run restarts no member: only a member "
        "killed from outside could diverge (Getting started: etcd's known bugs)",
        "etcd 3.4.23 has a known bug: a progress notification can come before events it says were sent (#15220); a "
        "watch check that fails on that is etcd's bug, and the audit's line names it (Getting started: etcd's known "
        "bugs)",
        "etcd 3.5.1 has known bugs: members killed or restored under load can diverge (#13766, #13514); a progress "
        "notification can come before events it says were sent (#15220); this run restarts members, so a divergence "
        "the audit finds may be etcd's bug, which its line then names (Getting started: etcd's known bugs)",
    ]
