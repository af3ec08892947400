"""When a rate-driven user's requests are due (``--etcd-arrival``): a metronome, or arrivals at random.

Pure: nothing of Locust or gevent, so the intervals can be checked on their own.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator

ARRIVALS = ("fixed", "poisson")


def intervals(arrival: str, rate: float, generator: random.Random) -> Callable[[], float]:
    """The seconds from one arrival to the next at ``rate`` per second on average: always 1/rate ("fixed"), or
    exponential with mean 1/rate ("poisson": independent arrivals, as of many clients that do not coordinate)."""
    if arrival == "poisson":
        expovariate = generator.expovariate
        return lambda: expovariate(rate)
    if arrival == "fixed":
        return itertools.repeat(1.0 / rate).__next__
    raise ValueError(f"{arrival!r} is not one of {', '.join(ARRIVALS)}")


def first_arrival(arrival: str, rate: float, generator: random.Random) -> float:
    """Seconds to a user's first request: a random phase within one interval, so that users spawned together do not
    fire together; for Poisson arrivals an exponential interval like any other."""
    if arrival == "poisson":
        return generator.expovariate(rate)
    return generator.uniform(0.0, 1.0 / rate)


def due_times(arrival: str, rate: float, start: float) -> Iterator[float]:
    """When each request of a user at ``rate`` per second is due, on the clock of ``start``: a random phase first,
    then one interval after another. The schedule never slips: a late request does not move the next one's time."""
    generator = random.Random()
    interval = intervals(arrival, rate, generator)
    due = start + first_arrival(arrival, rate, generator)
    while True:
        yield due
        due += interval()
