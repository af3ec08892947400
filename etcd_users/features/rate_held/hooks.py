"""A rate-mode run (``--etcd-user-rate``) that did not hold its rate says so at its end, in one line: the rate planned
and achieved, how far behind the schedule fell, and which side was short, the client's CPU or etcd.

The rate is judged over the measured window after spawning (``spawning_complete`` to ``test_stop``, whole seconds):
the operations sent on a schedule (one ``intended`` latency each, however many requests an operation makes) per
second, against ``--etcd-user-rate`` times the users that follow it. Below ``HELD_SHARE`` of it, the rate was not
held. The client was short when its busiest process wanted ``CLIENT_BOUND_PCT`` % of a core (CPU used plus time
waiting for one, ``PREFIX_client_cpu.csv``'s rule); else etcd was: each user waits for an answer before its next
request, so at etcd's service time the users could not send more. A run driven by a load shape is left to the
shape's own per-level verdicts. ``RateShortfall`` is a feature's hooks, whose line is the last of the run; ``held``,
``short_side`` and ``shortfall_line`` are pure.
"""

import logging
import time
from typing import NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.files import CLIENT_BOUND_PCT, INTENDED, SERVICE
from etcd_users.latency.client_cpu import ClientCpu, Row, busiest
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import Key
from etcd_users.latency.user_rate import users_at_rate, whole_seconds

_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

HELD_SHARE = 0.9  # achieved below this share of the planned rate: not held


class Shortfall(NamedTuple):
    planned_per_s: float
    achieved_per_s: float
    window_s: int
    users: int
    intended_p50_ms: float | None
    service_p50_ms: float | None
    service_mean_ms: float | None
    client_cpu_pct: float | None  # the busiest client process's mean CPU over the window, % of one core
    client_wait_pct: float | None  # and the time it waited for a CPU

    @property
    def behind_s(self) -> float:
        """How far the schedule fell behind by the window's end: the operations owed, in seconds of the plan."""
        return self.window_s * max(0.0, 1.0 - self.achieved_per_s / self.planned_per_s)


def held(planned_per_s: float, operations: int, window_s: int) -> bool:
    """The rate rule: at least ``HELD_SHARE`` of the planned operations per second over a window of whole seconds;
    a window without a second, or no plan, is held (nothing to judge)."""
    if window_s < 1 or planned_per_s <= 0:
        return True
    return operations / window_s >= HELD_SHARE * planned_per_s


def short_side(shortfall: Shortfall) -> str:
    """Which side was short, with the figure that says so."""
    cpu, wait = shortfall.client_cpu_pct, shortfall.client_wait_pct
    if cpu is not None and cpu + (wait or 0.0) >= CLIENT_BOUND_PCT:
        waiting = f" and waited {wait:.0f} % for one" if wait else ""
        return (
            f"the client's CPU (its busiest process used {cpu:.0f} % of a core{waiting}): add --processes N or workers"
        )
    client = f"; the client at {cpu:.0f} % of a core" if cpu is not None else ""
    mean = shortfall.service_mean_ms
    if mean is None or mean <= 0:
        return f"etcd (no answer measured{client})"
    most = shortfall.users * 1000.0 / mean
    return (
        f"etcd's answers for {shortfall.users} users: at {mean:.1f} ms each, users that wait for them send at most "
        f"{most:,.0f}/s{client}; give the rate to more users (a lower --etcd-user-rate)"
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def shortfall_line(shortfall: Shortfall) -> str:
    achieved, planned = shortfall.achieved_per_s, shortfall.planned_per_s
    percent = 100.0 * achieved / planned
    share = f"{percent:.1f}" if percent < 10 else f"{percent:.0f}"
    return (
        f"locust-etcd: the rate was not held: {achieved:,.0f}/s of the {planned:,.0f}/s "
        f"planned ({share} %, below {100 * HELD_SHARE:.0f} %) over the {shortfall.window_s} s after spawning; the "
        f"schedule fell {shortfall.behind_s:.1f} s behind (intended P50 {_ms(shortfall.intended_p50_ms)}, service "
        f"P50 {_ms(shortfall.service_p50_ms)}); short: {short_side(shortfall)}"
    )


class RateShortfall(FeatureHooks):
    """Counts a master's (or single process's) scheduled operations and client CPU per second, and judges at quit."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.recorder = tool.get(LatencyRecorder)
        self.recorder.store.merged_listeners.append(self._on_merged)
        tool.get(ClientCpu).listeners.append(self._on_cpu)
        self.environment = None
        self._reset()

    def _reset(self) -> None:
        self.rate = 0.0
        self.users = 0
        self.window: tuple[float, float | None] | None = None  # spawning complete, test stop
        self.operations: dict[int, int] = {}  # scheduled operations per second
        self.cpu: list[Row] = []

    def _on_merged(self, second: int, key: Key, histogram: HdrHistogram | None, failures: int) -> None:
        if key[2] == INTENDED:
            count = failures + (histogram.total_count if histogram is not None else 0)
            self.operations[second] = self.operations.get(second, 0) + count

    def _on_cpu(self, row: Row) -> None:
        if self.rate > 0:  # a second's row per process: kept for rate-mode runs only
            self.cpu.append(row)

    def on_init(self, environment, **_kwargs) -> None:
        self.environment = environment

    def on_run_start(self, environment, settings) -> None:
        self._reset()
        self.rate = settings.user_rate

    def on_spawning_complete(self, **_kwargs) -> None:
        environment = self.environment
        runner = environment.runner if environment is not None else None
        if run_context(environment).role.is_worker or environment.shape_class is not None or self.rate <= 0:
            return
        self.users = users_at_rate(environment, runner)
        self.window = (time.time(), None)

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self.window is not None and self.window[1] is None:
            self.window = (self.window[0], time.time())

    def judge(self) -> Shortfall | None:
        """The run's shortfall, None when it held its rate (or was no rate-mode run to judge)."""
        if self.window is None or not self.users:
            return None
        start, end = self.window
        seconds = whole_seconds(start, end if end is not None else time.time())
        self.recorder.collect()
        planned = self.rate * self.users
        operations = sum(self.operations.get(second, 0) for second in seconds)
        if not operations or held(planned, operations, len(seconds)):  # no operation at all: the empty run's line
            return None
        cpu, wait = busiest(self.cpu, seconds)
        service = hdr.merge(self.recorder.store.histograms(SERVICE).values())
        intended = hdr.merge(self.recorder.store.histograms(INTENDED).values())
        return Shortfall(
            planned,
            operations / len(seconds),
            len(seconds),
            self.users,
            _p50_ms(intended),
            _p50_ms(service),
            hdr.mean_us(service) / 1000.0 if service is not None and service.total_count else None,
            cpu,
            wait,
        )

    def on_quit(self, **_kwargs) -> None:
        shortfall = self.judge()
        if shortfall is not None:
            _console.info("%s", shortfall_line(shortfall))


def _p50_ms(histogram: HdrHistogram | None) -> float | None:
    if histogram is None or not histogram.total_count:
        return None
    return hdr.percentiles_us(histogram, (50.0,))[0] / 1000.0
