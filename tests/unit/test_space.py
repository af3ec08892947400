"""The db against its quota and the history's compaction, without etcd: the growth rate and the time left, the 80 %
warning and the NOSPACE alarm's text, the compaction schedule, the local etcd's quota and compaction flags. Real
members filling up are ``tests/e2e/test_space.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads)

import argparse
import logging
from types import SimpleNamespace

import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.core.role import Role
from etcd_users.core.run_context import RunContext
from etcd_users.features.monitoring.space import (
    Alarms,
    QuotaWatch,
    SpaceWatch,
    alarm_message,
    alarm_summary,
    compaction_source,
    format_duration,
    growth_rate,
    quota_warning,
    recovery_commands,
    seconds_left,
)
from etcd_users.local import AUTO_COMPACTION_RETENTION, QUOTA_BYTES, LocalCluster, fitting_quota
from etcd_users.members.seen import MembersSeen
from etcd_users.members.server_metrics import DB_SIZE, QUOTA, Scrape
from etcd_users.settings import settings_from_options
from etcd_users.transport.compaction import CompactionSchedule

MIB = 1024**2
GIB = 1024**3

# -- growth and time left -------------------------------------------------------------------------------------


def test_growth_rate_is_bytes_per_second_from_the_first_to_the_last_poll():
    assert growth_rate([(100.0, 1000.0), (105.0, 6000.0), (110.0, 21000.0)]) == 2000.0
    assert growth_rate([(100.0, 5000.0), (110.0, 3000.0)]) == -200.0  # a defragmented db shrinks
    assert growth_rate([(100.0, 1000.0)]) is None
    assert growth_rate([]) is None
    assert growth_rate([(100.0, 1000.0), (100.0, 2000.0)]) is None


def test_seconds_left_at_the_current_pace():
    assert seconds_left(80.0, 100.0, 2.0) == 10.0
    assert seconds_left(100.0, 100.0, 2.0) == 0.0
    assert seconds_left(120.0, 100.0, None) == 0.0
    assert seconds_left(80.0, 100.0, 0.0) is None
    assert seconds_left(80.0, 100.0, -1.0) is None
    assert seconds_left(80.0, 100.0, None) is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0 s"), (19.2, "19 s"), (89, "89 s"), (170, "3 min"), (5339, "89 min"), (9000, "2.5 h")]
)
def test_durations_read_as_seconds_minutes_or_hours(seconds, text):
    assert format_duration(seconds) == text


# -- the 80 % warning -----------------------------------------------------------------------------------------


def test_the_warning_names_the_member_the_share_the_pace_and_the_way_out():
    db, quota = 0.803 * 2 * GIB, 2 * GIB
    rate = 21.4 * MIB
    assert quota_warning("http://127.0.0.1:2379", db, quota, rate) == (
        "etcd http://127.0.0.1:2379: db 1.6 GiB is 80.3 % of its 2.0 GiB quota, growing 21.4 MiB/s: full in about "
        "19 s; compact (--etcd-compact-interval) or raise --quota-backend-bytes"
    )
    assert quota_warning("m", 0.9 * quota, quota, 0.0).endswith(
        "90.0 % of its 2.0 GiB quota, not growing now; compact (--etcd-compact-interval) or raise --quota-backend-bytes"
    )
    assert ", full; compact" in quota_warning("m", quota, quota, None)


def test_one_warning_per_member_once_two_polls_give_the_pace():
    watch = QuotaWatch()
    quota = 10 * MIB
    assert watch.observe("a", 0.0, 7 * MIB, quota) is None  # below 80 %
    assert watch.observe("a", 1.0, 8.5 * MIB, quota) == (
        "etcd a: db 8.5 MiB is 85.0 % of its 10.0 MiB quota, growing 1.5 MiB/s: full in about 1 s; compact "
        "(--etcd-compact-interval) or raise --quota-backend-bytes"
    )
    assert watch.observe("a", 2.0, 9 * MIB, quota) is None  # once per member
    # a member already past the share at its first poll waits for a second one, to tell the pace
    assert watch.observe("b", 0.0, 9 * MIB, quota) is None
    assert "9.0 MiB is 90.0 %" in watch.observe("b", 5.0, 9 * MIB, quota)
    assert watch.observe("c", 0.0, None, quota) is None  # a scrape without the db size
    assert watch.observe("d", 0.0, 9 * MIB, None) is None  # nor the quota
    assert watch.warned == {"a", "b"}


LOCAL = "the local etcd compacts itself (history compacted every 5s)"


def test_without_compaction_the_warning_points_to_it():
    db, quota, rate = 0.85 * 2 * GIB, 2 * GIB, 10 * MIB
    assert quota_warning("m", db, quota, rate, in_use=0.84 * 2 * GIB) == (
        "etcd m: db 1.7 GiB is 85.0 % of its 2.0 GiB quota, growing 10.0 MiB/s: full in about 31 s; compact "
        "(--etcd-compact-interval) or raise --quota-backend-bytes"
    )


def test_with_compaction_running_the_warning_points_to_defragmentation():
    db, quota, rate = 0.85 * 2 * GIB, 2 * GIB, 10 * MIB
    assert quota_warning("m", db, quota, rate, LOCAL) == (
        "etcd m: db 1.7 GiB is 85.0 % of its 2.0 GiB quota, growing 10.0 MiB/s: full in about 31 s; the local etcd "
        "compacts itself (history compacted every 5s), yet the file nears its quota: compaction frees pages inside it "
        "but never shrinks it: defragment (--etcd-disrupt defrag:all@TIME, or etcdctl defrag) or raise "
        "--quota-backend-bytes"
    )


def test_free_pages_point_to_defragmentation_whoever_compacts():
    db, quota = 0.85 * 2 * GIB, 2 * GIB
    interval = "--etcd-compact-interval 30 compacts the history every 30 s"
    assert quota_warning("m", db, quota, 0.0, interval, in_use=0.5 * GIB) == (
        "etcd m: db 1.7 GiB is 85.0 % of its 2.0 GiB quota (1.2 GiB of it free pages), not growing now; "
        "--etcd-compact-interval 30 compacts the history every 30 s, and compaction frees pages inside the file but "
        "never shrinks it: defragment (--etcd-disrupt defrag:all@TIME, or etcdctl defrag) or raise "
        "--quota-backend-bytes"
    )
    # the cluster's own compaction, unknown to the tool, shows as free pages too
    assert quota_warning("m", db, quota, 0.0, in_use=0.5 * GIB).endswith(
        "(1.2 GiB of it free pages), not growing now; compaction frees pages inside the file but never shrinks it: "
        "defragment (--etcd-disrupt defrag:all@TIME, or etcdctl defrag) or raise --quota-backend-bytes"
    )


def test_live_data_that_fills_the_file_points_to_a_larger_quota():
    db, quota = 0.85 * 2 * GIB, 2 * GIB
    assert quota_warning("m", db, quota, None, LOCAL, in_use=0.8 * 2 * GIB) == (
        "etcd m: db 1.7 GiB is 85.0 % of its 2.0 GiB quota (1.6 GiB of it live data), growth unknown; the local etcd "
        "compacts itself (history compacted every 5s), so defragmenting frees little: raise --quota-backend-bytes, "
        "or write fewer or smaller keys"
    )


def test_who_compacts_the_run_s_history():
    def settings(**values):
        namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
        vars(namespace).update(values)
        return settings_from_options(namespace)

    assert compaction_source(settings(), None) == ""
    assert compaction_source(settings(), "history compacted every 5s") == LOCAL
    assert compaction_source(settings(etcd_compact_interval=30.0), "history compacted every 5s") == (
        "--etcd-compact-interval 30 compacts the history every 30 s"
    )
    assert LocalCluster(1).compaction == "history compacted every 5s"
    assert LocalCluster(1, auto_compaction_retention=None).compaction is None
    watch = QuotaWatch(compacting=LOCAL)  # the run's watch passes the in-use size of each scrape
    watch.observe("a", 0.0, 8 * MIB, 10 * MIB, 2 * MIB)
    assert "(7.0 MiB of it free pages)" in watch.observe("a", 1.0, 9 * MIB, 10 * MIB, 2 * MIB)


def test_the_pace_is_taken_over_the_last_polls_only():
    watch = QuotaWatch(polls=3)
    quota = 100.0
    for second, size in enumerate([0.0, 10.0, 20.0, 21.0, 22.0]):
        assert watch.observe("a", float(second), size, quota) is None
    warning = watch.observe("a", 5.0, 82.0, quota)  # over (3 s, 21 B) … (5 s, 82 B): 30.5 B/s
    assert "growing 30 B/s: full in about 1 s" in warning, warning


# -- the NOSPACE alarm ----------------------------------------------------------------------------------------


def test_recovery_is_compact_defragment_every_member_then_disarm():
    endpoints = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
    assert recovery_commands(endpoints, 123456) == [
        "etcdctl --endpoints http://10.0.0.1:2379 compact 123456",
        "etcdctl --endpoints http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379 defrag",
        "etcdctl --endpoints http://10.0.0.1:2379 alarm disarm",
    ]
    [compact, *_] = recovery_commands(endpoints[:1], None, " --cacert CA.pem")
    assert compact.startswith("etcdctl --cacert CA.pem --endpoints http://10.0.0.1:2379 compact REVISION   # ")


def test_the_alarm_message_says_what_happens_to_the_run_and_how_to_recover():
    message = alarm_message(["http://127.0.0.1:2379"], ["http://127.0.0.1:2379"], 77)
    first, *commands = message.splitlines()
    assert first.startswith(
        "etcd NOSPACE alarm on http://127.0.0.1:2379: the db reached its quota and etcd refuses every write with "
        "'mvcc: database space exceeded' until the alarm is disarmed"
    )
    assert "the run goes on, counting them as failures" in first
    assert [command.strip() for command in commands] == recovery_commands(["http://127.0.0.1:2379"], 77)
    assert alarm_summary(["http://127.0.0.1:2379"]).startswith("NOSPACE alarm on http://127.0.0.1:2379: ")
    assert "\n" not in alarm_summary([])


class FakeProbe:
    """Answers the Alarm RPC with what the test sets in ``alarms`` (an ``Alarms``, or an error to raise)."""

    def __init__(self) -> None:
        self.alarms: Alarms | Exception = Alarms((), 1)
        self.closed = False

    def run(self, work):
        if isinstance(self.alarms, Exception):
            raise self.alarms
        return self.alarms

    def close(self) -> None:
        self.closed = True


def watch_of(endpoints: str, errors: tuple[str, ...] = ()) -> SpaceWatch:
    options = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    options.etcd_endpoints = endpoints
    stats = SimpleNamespace(errors={index: SimpleNamespace(error=error) for index, error in enumerate(errors)})
    watch = SpaceWatch(settings_from_options(options), SimpleNamespace(stats=stats))
    watch.probe = FakeProbe()
    return watch


def space_records(caplog, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "etcd_users.monitoring.space" and r.levelno == level]


def test_the_alarm_is_logged_once_per_run_shown_while_raised_and_cleared_when_disarmed(caplog):
    caplog.set_level(logging.INFO)
    watch = watch_of("http://10.0.0.1:2379,http://10.0.0.2:2379")
    context = RunContext(SimpleNamespace(), Role.SINGLE)  # the web UI reads the alarm there
    context.get(MembersSeen).space_watch = watch
    watch.after_poll(0.0, [])
    assert context.get(MembersSeen).alarm is None and space_records(caplog, logging.ERROR) == []
    watch.probe.alarms = Alarms((("NOSPACE", "http://10.0.0.2:2379"),), 4242)
    watch.after_poll(1.0, [])
    watch.after_poll(2.0, [])
    [error] = space_records(caplog, logging.ERROR)
    assert error.startswith("etcd NOSPACE alarm on http://10.0.0.2:2379: ")
    assert error.splitlines()[1:] == [
        "    etcdctl --endpoints http://10.0.0.1:2379 compact 4242",
        "    etcdctl --endpoints http://10.0.0.1:2379,http://10.0.0.2:2379 defrag",
        "    etcdctl --endpoints http://10.0.0.1:2379 alarm disarm",
    ]
    assert context.get(MembersSeen).alarm == alarm_summary(["http://10.0.0.2:2379"])
    watch.probe.alarms = Alarms((), 5000)
    watch.after_poll(3.0, [])
    assert context.get(MembersSeen).alarm is None
    assert "etcd: the NOSPACE alarm is disarmed; writes are accepted again" in space_records(caplog, logging.INFO)
    watch.probe.alarms = Alarms((("NOSPACE", "http://10.0.0.2:2379"),), 6000)
    watch.after_poll(4.0, [])
    assert context.get(MembersSeen).alarm is not None and len(space_records(caplog, logging.ERROR)) == 1  # once per run
    watch.close()
    assert watch.probe.closed


def test_refused_writes_are_the_alarm_when_the_members_cannot_be_asked(caplog):
    watch = watch_of("http://10.0.0.1:2379", errors=("DEADLINE_EXCEEDED", "etcdserver: mvcc: database space exceeded"))
    watch.probe.alarms = TimeoutError()
    watch.after_poll(0.0, [])
    watch.probe.alarms = RuntimeError("the etcd transport is closed")
    watch.after_poll(1.0, [])
    watch.after_poll(2.0, [])
    assert space_records(caplog, logging.WARNING) == [
        "etcd alarms: could not ask the members (DEADLINE_EXCEEDED); the run goes on",
        "etcd alarms: could not ask the members (RuntimeError: the etcd transport is closed); the run goes on",
    ]  # one per kind
    [error] = space_records(caplog, logging.ERROR)
    assert error.startswith("etcd NOSPACE alarm (writes fail with it): ")
    assert "    etcdctl --endpoints http://10.0.0.1:2379 compact REVISION   # REVISION: " in error
    assert watch.alarm == alarm_summary([])


def test_each_member_past_80_percent_is_warned_once_from_the_polls(caplog):
    watch = watch_of("http://10.0.0.1:2379")
    full = Scrape(values={DB_SIZE: 9 * MIB, QUOTA: 10 * MIB})
    watch.after_poll(0.0, [("http://10.0.0.1:2379", Scrape(values={DB_SIZE: 1 * MIB, QUOTA: 10 * MIB}))])
    watch.after_poll(8.0, [("http://10.0.0.1:2379", full), ("http://10.0.0.2:2379", "no answer within 1s")])
    watch.after_poll(9.0, [("http://10.0.0.1:2379", full)])
    [warning] = space_records(caplog, logging.WARNING)
    assert warning.startswith(
        "etcd http://10.0.0.1:2379: db 9.0 MiB is 90.0 % of its 10.0 MiB quota, growing 1.0 MiB/s"
    )


# -- the compaction schedule ----------------------------------------------------------------------------------


def test_compaction_picks_the_newest_revision_noted_at_least_the_interval_ago():
    schedule = CompactionSchedule(10.0, started=0.0)
    for second in range(0, 10):
        schedule.note(float(second), 1000 + 100 * second)
        assert schedule.due(float(second)) is None  # not before the interval has passed since the start
    schedule.note(10.0, 2000)
    assert schedule.due(10.0) == 1000  # the revision of 10 s ago
    schedule.compacted(10.0, 1000)
    for second in range(11, 20):
        schedule.note(float(second), 1000 + 100 * second)
        assert schedule.due(float(second)) is None  # every 10 s, not every tick
    schedule.note(20.0, 3000)
    assert schedule.due(20.0) == 2000
    schedule.compacted(20.0, 2000)
    schedule.note(25.0, 3500)
    schedule.note(30.5, 4000)
    assert schedule.due(30.5) == 3000  # noted at 20 s: the newest at least 10 s before 30.5 s, not 25 s's


def test_compaction_skips_a_revision_already_compacted_and_a_quiet_cluster():
    schedule = CompactionSchedule(5.0, started=0.0)
    schedule.note(0.0, 50)
    schedule.note(4.0, 50)
    assert schedule.due(5.0) == 50
    schedule.compacted(5.0, 50)
    schedule.note(9.0, 50)  # nothing written since
    assert schedule.due(10.0) is None
    schedule.note(0.0, 0)  # no revision known (a failed Status) is not noted
    assert schedule.due(20.0) is None


def test_compaction_slack_absorbs_a_timer_that_wakes_a_little_early():
    schedule = CompactionSchedule(1.0, started=0.0, slack=0.125)
    schedule.note(0.0, 10)
    schedule.note(0.25, 20)
    assert schedule.due(0.99) == 10
    with pytest.raises(ValueError):
        CompactionSchedule(0.0, started=0.0)


# -- the local etcd's quota and compaction --------------------------------------------------------------------


def test_the_local_quota_is_8_gib_or_half_the_free_disk():
    assert QUOTA_BYTES == 8 * GIB
    assert fitting_quota(100 * GIB) == 8 * GIB
    assert fitting_quota(10 * GIB + 12345) == 5 * GIB
    assert fitting_quota(10 * MIB) == 5 * MIB
    assert fitting_quota(0) == MIB


def test_the_local_etcd_compacts_every_5s_unless_told_otherwise():
    assert AUTO_COMPACTION_RETENTION == "5s"
    cluster = LocalCluster(1)
    cluster.quota_bytes = 8 * GIB  # as start() sets it
    assert cluster._space_args() == [
        "--quota-backend-bytes", str(8 * GIB), "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "5s"
    ]  # fmt: skip
    assert cluster.describe_space() == "quota 8.0 GiB, history compacted every 5s"
    small = LocalCluster(1, quota_bytes=4 * MIB, auto_compaction_retention=None)
    assert small._space_args() == ["--quota-backend-bytes", str(4 * MIB)]
    assert small.describe_space() == "quota 4.0 MiB, no auto-compaction"
    assert LocalCluster(1, auto_compaction_retention="0").auto_compaction_retention is None
    with pytest.raises(ValueError, match="quota_bytes"):
        LocalCluster(1, quota_bytes=0)


def test_flags_given_as_extra_args_win():
    cluster = LocalCluster(1, extra_args=["--quota-backend-bytes=2097152", "--auto-compaction-retention", "1m"])
    cluster.quota_bytes = 8 * GIB
    assert cluster._space_args() == []
    assert cluster.describe_space() == "quota 2.0 MiB, history compacted every 1m"
    revision = LocalCluster(1, extra_args=["-auto-compaction-mode", "revision", "--auto-compaction-retention", "1000"])
    revision.quota_bytes = GIB
    assert revision._space_args() == ["--quota-backend-bytes", str(GIB)]
    assert revision.describe_space() == "quota 1.0 GiB, history compacted to the last 1000 revisions"
