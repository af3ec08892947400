"""Python's cyclic garbage collector, kept from scanning thousands of users at every full collection.

With thousands of users, thousands of calls are in flight at any moment: the objects of each call outlive the young
collections and are promoted, and full collections, each scanning every user, greenlet and client of the process,
follow one another (a fifth of the process's CPU at 10,000 users). Once the users are spawned they live until the
next change of users: ``gc.freeze()`` sets them aside, so full collections only scan what came after. A larger first
threshold gives a call's objects time to die young before a collection promotes them. A spawn that leaves fewer users
than the last one first collects what is garbage by then (the users a shape stopped), once, and sets the rest aside
again, so a run of an hour whose shape changes its users every minute keeps nothing it no longer needs; a spawn that
adds users only sets the new ones aside, without a full collection (a pause of 0.1 s or more on a process that has
loaded Locust, grpc and the tool, which every user would feel). The run's end unfreezes them.
"""

import gc

# allocations between young collections (Python's default is 700): a few hundred requests' objects
YOUNG_THRESHOLD = 20_000
_frozen_users = 0  # the users when the objects were last set aside


def on_test_start(**_kwargs) -> None:
    young, middle, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, oldest)


def on_spawning_complete(user_count: int = 0, **_kwargs) -> None:
    """The users are up: what exists now lives until the users change again."""
    global _frozen_users
    if user_count < _frozen_users:  # the users a shape stopped are garbage now, and not to be set aside
        gc.unfreeze()
        gc.collect()
    gc.freeze()
    _frozen_users = user_count


def on_test_stop(**_kwargs) -> None:
    global _frozen_users
    _frozen_users = 0
    gc.unfreeze()  # the stopped users' objects are garbage now: let the collector have them
