"""Python's cyclic garbage collector, kept from scanning thousands of users at every full collection.

With thousands of users, thousands of calls are in flight at any moment: the objects of each call outlive the young
collections and are promoted, and full collections, each scanning every user, greenlet and client of the process,
follow one another (a fifth of the process's CPU at 10,000 users). Once the users are spawned they live as long as
the run: ``gc.freeze()`` sets them aside, so full collections only scan what came after. A larger first threshold
gives a call's objects time to die young before a collection promotes them. The run's end unfreezes them; users a
shape stops during the run stay set aside until then, a few kilobytes each.
"""

import gc

# allocations between young collections (Python's default is 700): a few hundred requests' objects
YOUNG_THRESHOLD = 20_000


def on_test_start() -> None:
    young, middle, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, oldest)


def on_spawning_complete() -> None:
    """The users are up: what exists now lives until the run stops."""
    gc.freeze()


def on_test_stop() -> None:
    gc.unfreeze()  # the stopped users' objects are garbage now: let the collector have them
