"""The collector's settings over a run: set aside once the users are up, back at the run's end."""

import gc
import weakref

import pytest

from etcd_users.core import collector


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    collector.on_test_stop()
    gc.set_threshold(*threshold)


def test_a_run_raises_the_young_threshold_and_keeps_the_others(restored_gc):
    gc.set_threshold(700, 10, 10)
    collector.on_test_start()
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 10, 10)
    gc.set_threshold(50_000, 10, 10)  # a locustfile's own, larger, is kept
    collector.on_test_start()
    assert gc.get_threshold() == (50_000, 10, 10)


def test_the_spawned_users_are_set_aside_until_the_run_stops(restored_gc):
    gc.unfreeze()
    users = [{"user": n} for n in range(100)]
    collector.on_spawning_complete()
    assert gc.get_freeze_count() >= len(users)
    collector.on_test_stop()
    assert gc.get_freeze_count() == 0


class _User:
    """A stand-in for a user: it refers to itself, as a user and its client do, so only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_users_stopped_between_two_spawns_are_freed_not_set_aside(restored_gc):
    gc.unfreeze()
    users = [_User() for _ in range(100)]
    collector.on_spawning_complete(user_count=100)  # the first level's users are up
    gone = weakref.ref(users[0])
    del users  # a shape stops them: garbage, held only by their own cycles
    collector.on_spawning_complete(user_count=10)  # the next level's users are up
    assert gone() is None


def test_a_spawn_that_adds_users_makes_no_full_collection(restored_gc):
    """Going up a ladder only sets the new users aside: a full pass would pause every user of the process."""
    gc.unfreeze()
    collector.on_spawning_complete(user_count=10)
    collections = gc.get_stats()[2]["collections"]
    collector.on_spawning_complete(user_count=20)
    assert gc.get_stats()[2]["collections"] == collections
    collector.on_spawning_complete(user_count=5)  # and coming down collects once
    assert gc.get_stats()[2]["collections"] == collections + 1
