"""The watchers' tally, pure: lag buckets, percentiles, etcd's cancel reasons, sums across processes."""

from etcd_users.run_state import watch_tally as tally_module
from etcd_users.run_state.watch_tally import COMPACTED_LABEL, WatchTally, bucket, cancel_label, percentile
from etcd_users.run_state.watchers import ProcessWatchers


def test_lags_are_exact_below_100_and_two_digits_above():
    assert [bucket(lag) for lag in (0, 7, 99, 100, 123, 4567, 98765)] == [0, 7, 99, 100, 120, 4500, 98000]


def test_percentiles_of_the_buckets():
    buckets = {0: 90, 5: 9, 40: 1}
    assert (percentile(buckets, 0.5), percentile(buckets, 0.99), percentile(buckets, 1.0)) == (0, 5, 40)
    assert percentile({}, 0.99) == 0


def test_a_cancel_is_counted_under_etcds_reason():
    assert cancel_label("", 42) == COMPACTED_LABEL == "mvcc: required revision has been compacted"
    assert cancel_label("etcdserver: permission denied", 0) == "etcdserver: permission denied"
    assert cancel_label("", 0) == "etcdserver: watch canceled"


def test_tallies_add_up_across_processes_through_their_reports():
    one = WatchTally(watchers=500, events=1000, first=10.0, last=12.0, by_response={0: 9, 3: 1}, by_watcher={3: 1})
    two = WatchTally(watchers=500, events=3000, first=11.0, last=14.0, by_response={0: 5}, cancelled={"x": 2})
    total = WatchTally()
    for tally in (one, two):
        total.add(WatchTally.from_dict(tally.to_dict()))
    assert (total.watchers, total.events, total.events_per_second) == (1000, 4000, 1000.0)
    assert total.by_response == {0: 14, 3: 1} and total.watchers_behind == 1 and total.cancelled == {"x": 2}
    assert total.line().startswith("watchers: 1000 watchers, 4000 events (1000.0/s), 0 progress notifications, ")
    assert "behind: P50 0 P99 3 max 3 revisions, 1 watchers behind (worst 3), cancelled: x 2" in total.line()


def test_the_slow_streams_are_the_share_asked_spread_evenly():
    process = ProcessWatchers()
    slow = [process.is_slow(stream, 0.25) for stream in range(8)]
    assert slow.count(True) == 2 and slow != sorted(slow, reverse=True)
    assert not any(process.is_slow(stream, 0.0) for stream in range(8))
    assert all(process.is_slow(stream, 1.0) for stream in range(8))


def test_a_watch_client_busy_in_half_the_intervals_with_events_is_client_bound():
    from etcd_users.analysis.client import CLIENT_BOUND_PCT

    assert CLIENT_BOUND_PCT == tally_module.CLIENT_BOUND_PCT  # the rule of the analysis, kept in one value
    tally = WatchTally()
    tally.count_interval(False, 100.0)  # no events: the interval does not count
    tally.count_interval(True, 89.9)
    assert (tally.event_intervals, tally.busy_intervals, tally.client_bound) == (1, 0, False)
    tally.count_interval(True, 90.0)
    tally.count_interval(True, None)  # a process whose CPU could not be read: not busy
    assert (tally.event_intervals, tally.busy_intervals, tally.client_bound) == (3, 1, False)
    tally.count_interval(True, 150.0)
    assert tally.client_bound and not WatchTally().client_bound
    # a loop 50 ms or more behind is busy too, whatever the CPU: the received responses wait for it
    lagging = WatchTally()
    lagging.count_interval(True, 40.0, 0.049)
    lagging.count_interval(True, 40.0, 0.05)
    assert (lagging.busy_intervals, lagging.client_bound) == (1, True) and tally_module.CLIENT_LAG_S == 0.05
    # a master adds its workers' intervals: the share is over every process's intervals
    total = WatchTally()
    total.add(WatchTally.from_dict(tally.to_dict()))
    total.add(WatchTally.from_dict(WatchTally(event_intervals=4).to_dict()))
    assert (total.event_intervals, total.busy_intervals, total.client_bound) == (8, 2, False)
    assert "client-bound" in tally.client_line() and "--processes" in tally.client_line()


def test_the_summarys_watch_keys_are_the_declared_ones():
    from etcd_users.files import SUMMARY_WATCH_KEYS

    tally = WatchTally()
    assert tally.summary() is None  # a run without watch events has no watch figures
    tally.count_interval(True, 95.0)
    summary = tally.summary()
    assert tuple(summary) == SUMMARY_WATCH_KEYS and summary["client_bound"] is True
