"""Everything the loop engine takes from Locust beyond its documented API, in one place.

The engine hands Locust's ``request`` listeners a batch of results at a time (``engine.results``). For Locust's own
listener (``Runner.__init__``'s ``on_request``, which logs a request into its name's ``StatsEntry`` and the
``Aggregated`` one at ``time.time()``) it logs the batch here, each result at the time it ended, a second's results
together: the counts, sums, buckets and cached copies come out as Locust's own logging would
(``tests/unit/test_engine.py`` logs the same requests both ways and compares). What that takes from Locust's
internals, and moves between its minor versions:

- how Locust's listener is told from others (its module and qualified name), and the event's list of listeners;
- ``StatsEntry``'s counters and its per-second cache (``_cache_response_times``), ``StatsError``'s key and counts;
- the rounding of a response time into its bucket (``locust.stats.bucket_response_time`` in newer Locust, which a
  locustfile may replace; the same rounding written inline in older ones, 2.40 among them);
- a user's state (``User._state``), and the flag that makes Locust exit with 2 after a listener raised
  (``locust.log.unhandled_greenlet_exception``).

``batch_logging_missing()`` says what of that this Locust lacks; the engine then hands every result to Locust's
listener one by one, as to any other listener (the per-request path), and says so in one line at the run's start.
"""

import locust.log
import locust.stats
from locust.exception import InterruptTaskSet, RescheduleTask, RescheduleTaskImmediately, StopUser
from locust.stats import RequestStats, StatsEntry, StatsError
from locust.user.users import LOCUST_STATE_RUNNING

import logging
import traceback
from collections import Counter
from collections.abc import Callable, Iterable

try:  # newer Locust lets a listener's StopTest through too; 2.40 has none
    from locust.exception import StopTest
except ImportError:
    StopTest = StopUser


# raised by a listener, these are the user's to handle (as Locust's EventHook.fire lets them through), not a failure
USER_EXCEPTIONS = (StopUser, StopTest, RescheduleTask, RescheduleTaskImmediately, InterruptTaskSet)

# a result: (name, seconds, ended at time.time() seconds, response length, error label or None, intended seconds or
# None); Locust's statistics have no intended time
Logged = tuple[str, float, float, int, str | None, float | None]

_LISTENER = ("locust.runners", "Runner.__init__.<locals>.on_request")
_ENTRY_FIELDS = (
    "use_response_times_cache",
    "last_request_timestamp",
    "_cache_response_times",
    "num_requests",
    "num_reqs_per_sec",
    "total_response_time",
    "min_response_time",
    "max_response_time",
    "response_times",
    "total_content_length",
    "num_failures",
    "num_fail_per_sec",
)
_ERROR_FIELDS = ("occurrences",)


def request_listeners(environment) -> list:
    """The listeners of Locust's ``request`` event now, in their order (a copy: a listener may add another)."""
    return list(environment.events.request._handlers)


def is_locust_listener(handler) -> bool:
    """``handler`` is Locust's own listener of the ``request`` event, which logs into the runner's statistics."""
    return (getattr(handler, "__module__", None), getattr(handler, "__qualname__", None)) == _LISTENER


def batch_logging_missing() -> str | None:
    """What this Locust lacks of what ``log_batch`` uses, in a few words; None when it has everything."""
    try:
        stats = RequestStats(use_response_times_cache=True)
        entry = stats.get("probe", "etcd")
        error = StatsError("etcd", "probe", "probe")
    except Exception as failure:  # a Locust whose statistics are made differently
        return f"its statistics cannot be made as before ({type(failure).__name__})"
    missing = [f"StatsEntry.{name}" for name in _ENTRY_FIELDS if not hasattr(entry, name)]
    missing += [f"StatsError.{name}" for name in _ERROR_FIELDS if not hasattr(error, name)]
    if not hasattr(StatsError, "create_key"):
        missing.append("StatsError.create_key")
    if not hasattr(stats, "errors") or not hasattr(stats, "entries"):
        missing.append("RequestStats.errors/entries")
    return f"Locust {locust.__version__} has no {', '.join(missing)}" if missing else None


def user_running(user) -> bool:
    """``user`` is running (not stopping, not stopped): what Locust's own task loop checks."""
    return user._state == LOCUST_STATE_RUNNING


def listener_failed() -> None:
    """A listener raised: log it as Locust's ``EventHook.fire`` does, and make the run exit with 2 as Locust would."""
    logging.error("Uncaught exception in event handler: \n%s", traceback.format_exc())
    locust.log.unhandled_greenlet_exception = True


def _bucket_function() -> Callable[[float], float]:
    """Locust's rounding of a response time (ms) into its bucket: the module's function, which a locustfile may
    replace, looked up at each batch; before Locust had one, the same rounding it wrote inline."""
    return getattr(locust.stats, "bucket_response_time", _inline_bucket)


def _inline_bucket(response_time: float) -> float:
    if response_time < 100:
        return round(response_time)
    if response_time < 1000:
        return round(response_time, -1)
    if response_time < 10000:
        return round(response_time, -2)
    return round(response_time, -3)


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
    bucket = _bucket_function()
    for name, (times, length, last, failures) in chunk.items():
        buckets = Counter(map(bucket, times))
        summed, fastest, slowest = sum(times), min(times), max(times)
        for entry in (stats.get(name, request_type), stats.total):
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
    for entry in (stats.total, stats.get(name, request_type)):
        entry.num_failures += 1
        entry.num_fail_per_sec[second] += 1
    key = StatsError.create_key(request_type, name, label)
    error = stats.errors.get(key)
    if error is None:
        error = stats.errors[key] = StatsError(request_type, name, label)
    error.occurrences += 1
    if hasattr(error, "first_seen"):  # newer Locust keeps when an error was first and last seen
        if error.first_seen is None:
            error.first_seen = at
        error.last_seen = at
