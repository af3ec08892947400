"""Whether the load generator was the limit, said by the run itself: early in a rate-mode run when the rate asked needs
more processes than it has, and at the end of any run whose busiest client process wanted a whole core.

- **Processes needed** (``--etcd-user-rate``): a few seconds after spawning, the client's measured cost per request
  (its processes' CPU over the requests they completed) times the rate planned says how many processes hold the rate
  at ``CLIENT_BOUND_PCT`` % of a core each; when that is more than the run has, one line says how many to give.
- **Client-bound** at the end: the busiest process wanted at least ``CLIENT_BOUND_PCT`` % of a core (its CPU plus its
  threads' waits for one, ``PREFIX_client_cpu.csv``'s rule, the one ``python -m analysis`` applies afterwards) over
  the seconds between spawning and the stop: the figures then measure the load generator, and the line says so.

On a master or single process; a run driven by a load shape is left to the shape's per-level verdicts, which apply
the same rule per level. ``processes_line`` and ``client_bound_line`` are pure.
"""

import logging
import math
import time

import gevent
from hdrh.histogram import HdrHistogram

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.role import Role
from etcd_users.core.run_context import run_context
from etcd_users.files import CLIENT_BOUND_PCT, MASTER_PROCESS, SERVICE
from etcd_users.latency.client_cpu import ClientCpu, Row, busiest
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import Key
from etcd_users.latency.user_rate import users_at_rate, whole_seconds

_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

MEASURED_SECONDS = 4  # whole seconds after spawning the cost per request is measured over
# a master has its workers' seconds a report later (every 3 s) and writes them after a grace of 2 s
MASTER_LAG_SECONDS = 6
MIN_WINDOW_SECONDS = 3  # a shorter window says nothing of a whole core


def processes_needed(planned_per_s: float, micros_per_request: float) -> int:
    """Processes that send ``planned_per_s`` requests a second at ``micros_per_request`` µs of CPU each, each process
    at ``CLIENT_BOUND_PCT`` % of a core."""
    return max(1, math.ceil(planned_per_s * micros_per_request / (1e6 * CLIENT_BOUND_PCT / 100.0)))


def processes_line(planned_per_s: float, micros_per_request: float, processes: int) -> str | None:
    """The line of a rate one process count cannot hold, or None."""
    needed = processes_needed(planned_per_s, micros_per_request)
    if needed <= processes:
        return None
    most = 1e6 * CLIENT_BOUND_PCT / 100.0 / micros_per_request
    has = f"{processes} process" if processes == 1 else f"{processes} processes"
    return (
        f"locust-etcd: the rate asks {planned_per_s:,.0f} requests/s, and a request costs this client "
        f"{micros_per_request:,.0f} µs of CPU: a process sends about {most:,.0f}/s at {CLIENT_BOUND_PCT:g} % of a "
        f"core, so the rate needs {needed} processes and this run has {has}; give --processes {needed} (or workers on "
        "other machines)"
    )


def client_bound_line(cpu: float, wait: float | None, window_s: int) -> str | None:
    """The end-of-run line of a client that wanted a whole core, or None."""
    wanted = cpu + (wait or 0.0)
    if wanted < CLIENT_BOUND_PCT:
        return None
    waiting = f", waiting {wait:.0f} % for one" if wait else ""
    return (
        f"locust-etcd: the client was the limit: its busiest process wanted {wanted:.0f} % of a core over the "
        f"{window_s} s after spawning (CPU {cpu:.0f} %{waiting}), so these figures measure the load generator as much "
        "as etcd; give --processes N (or workers on other machines) and compare"
    )


class ClientBound(FeatureHooks):
    """The client's CPU against its requests: a rate's processes early, the client-bound line at quit."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        tool.get(LatencyRecorder).store.merged_listeners.append(self._on_merged)
        tool.get(ClientCpu).listeners.append(self._on_cpu)
        self.environment = None
        self._look: gevent.Greenlet | None = None
        self._reset()

    def _reset(self) -> None:
        self.rate = 0.0
        self.judged = False  # a master or single process that runs no shape
        self.window: tuple[float, float | None] | None = None  # spawning complete, test stop
        self.requests: dict[int, int] = {}  # requests completed per second, every process's
        self.cpu: list[Row] = []

    def _on_merged(self, second: int, key: Key, histogram: HdrHistogram | None, failures: int) -> None:
        if self.judged and key[2] == SERVICE:
            count = failures + (histogram.total_count if histogram is not None else 0)
            self.requests[second] = self.requests.get(second, 0) + count

    def _on_cpu(self, row: Row) -> None:
        if self.judged:
            self.cpu.append(row)

    def on_init(self, environment, **_kwargs) -> None:
        self.environment = environment

    def on_test_start(self, environment, **_kwargs) -> None:
        self._reset()
        # also a locustfile whose users are not etcd's (no --etcd-* options): its client can be the limit as well
        self.rate = float(getattr(environment.parsed_options, "etcd_user_rate", 0.0) or 0.0)
        self.judged = environment.shape_class is None and run_context(environment).role.judges

    def on_spawning_complete(self, **_kwargs) -> None:
        environment = self.environment
        runner = environment.runner if environment is not None else None
        role = run_context(environment).role if environment is not None else Role.SINGLE
        if not self.judged or role.is_worker or self.window is not None:
            return
        self.window = (time.time(), None)
        if self.rate > 0:
            lag = MASTER_LAG_SECONDS if role.is_master else 1
            self._look = gevent.spawn_later(MEASURED_SECONDS + 1 + lag, self._say_processes_needed, runner)

    def _say_processes_needed(self, runner) -> None:
        seconds = range(math.ceil(self.window[0]), math.ceil(self.window[0]) + MEASURED_SECONDS)
        requests = sum(self.requests.get(second, 0) for second in seconds)
        rows = [row for row in self.cpu if row[0] in seconds]
        if not requests or not rows:
            return
        micros = sum(row[2] for row in rows) * 10_000.0 / requests  # % of a core over a second: 10,000 µs per %
        planned = self.rate * users_at_rate(self.environment, runner)
        processes = len({row[1] for row in rows if row[1] != MASTER_PROCESS}) or 1  # a master runs no users
        line = processes_line(planned, micros, processes)
        if line is not None:
            _console.warning("%s", line)

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self._look is not None:
            self._look.kill(block=False)
            self._look = None
        if self.window is not None and self.window[1] is None:
            self.window = (self.window[0], time.time())

    def on_quit(self, **_kwargs) -> None:
        if self.window is None:
            return
        start, end = self.window
        seconds = whole_seconds(start, end if end is not None else time.time())
        if len(seconds) < MIN_WINDOW_SECONDS:
            return
        cpu, wait = busiest(self.cpu, seconds)
        line = client_bound_line(cpu, wait, len(seconds)) if cpu is not None else None
        if line is not None:
            _console.warning("%s", line)
