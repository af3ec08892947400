"""A batch of results logged into Locust's ``RequestStats`` as Locust's own request listener would have logged them one
by one, each at its own time.

Locust's listener (``Runner.__init__``'s ``on_request``) logs a request into its name's ``StatsEntry`` and the
``Aggregated`` one at ``time.time()``: its second in ``num_reqs_per_sec``, its response time bucketed into
``response_times``, and, on a master or single process, a copy of ``response_times`` at each new second for the
web UI's current percentiles. A batch arrives up to a tenth of a second after its requests ended, so each request is
logged here at the time it ended instead, a second's requests together: the counts, sums, buckets and cached copies
come out as Locust's own would (``tests/unit/test_engine.py`` logs the same requests both ways and compares).
Failures are logged as Locust logs them, a request and then an error of etcd's label.
"""

import locust.stats
from locust.stats import RequestStats, StatsEntry, StatsError

from collections import Counter
from collections.abc import Iterable

# a result: (name, seconds, ended at time.time() seconds, response length, error label or None, intended seconds or
# None); Locust's statistics have no intended time
Logged = tuple[str, float, float, int, str | None, float | None]

_LISTENER = ("locust.runners", "Runner.__init__.<locals>.on_request")


def is_locust_listener(handler) -> bool:
    """``handler`` is Locust's own listener of the ``request`` event, which logs into the runner's statistics."""
    return (getattr(handler, "__module__", None), getattr(handler, "__qualname__", None)) == _LISTENER


def log_batch(stats: RequestStats, request_type: str, results: Iterable[Logged]) -> None:
    """Log ``results``, in the order they ended, into ``stats``."""
    second = None
    chunk: dict[str, list] = {}
    for name, seconds, at, length, label, _intended in results:
        if int(at) != second:
            if chunk:
                _log_second(stats, request_type, chunk)
                chunk = {}
            second = int(at)
        group = chunk.get(name)
        if group is None:
            group = chunk[name] = [[], 0, at, []]
        group[0].append(seconds * 1000.0)
        group[1] += length
        group[2] = at
        if label is not None:
            group[3].append((label, at))
    if chunk:
        _log_second(stats, request_type, chunk)


def _log_second(stats: RequestStats, request_type: str, chunk: dict[str, list]) -> None:
    """One second's results, by name: into each name's entry and the Aggregated one."""
    bucket = locust.stats.bucket_response_time  # looked up each time: Locust lets a locustfile replace it
    for name, (times, length, last, failures) in chunk.items():
        buckets = Counter(map(bucket, times))
        summed, fastest, slowest = sum(times), min(times), max(times)
        for entry in (stats.entries[(name, request_type)], stats.total):
            _log_entry(entry, len(times), last, summed, fastest, slowest, buckets, length)
        for label, at in failures:
            _log_error(stats, request_type, name, label, at)


def _log_entry(
    entry: StatsEntry,
    count: int,
    last: float,
    summed: float,
    fastest: float,
    slowest: float,
    buckets: Counter,
    length: int,
) -> None:
    """What ``StatsEntry.log`` does ``count`` times within the second of ``last``."""
    second = int(last)
    previous = entry.last_request_timestamp
    if entry.use_response_times_cache and previous and second > int(previous):
        entry._cache_response_times(second - 1)
    entry.num_requests += count
    entry.num_reqs_per_sec[second] += count
    entry.last_request_timestamp = last
    entry.total_response_time += summed
    entry.min_response_time = fastest if entry.min_response_time is None else min(entry.min_response_time, fastest)
    entry.max_response_time = max(entry.max_response_time, slowest)
    response_times = entry.response_times
    for rounded, times in buckets.items():
        response_times[rounded] += times
    entry.total_content_length += length


def _log_error(stats: RequestStats, request_type: str, name: str, label: str, at: float) -> None:
    """What ``RequestStats.log_error`` (and ``StatsError.occurred``) does, at ``at``."""
    second = int(at)
    for entry in (stats.total, stats.entries[(name, request_type)]):
        entry.num_failures += 1
        entry.num_fail_per_sec[second] += 1
    key = StatsError.create_key(request_type, name, label)
    error = stats.errors.get(key)
    if error is None:
        error = stats.errors[key] = StatsError(request_type, name, label)
    error.occurrences += 1
    if error.first_seen is None:
        error.first_seen = at
    error.last_seen = at
