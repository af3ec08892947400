"""``--etcd-disrupt``: the master (or single process) does each item of the schedule at its time while the load goes on,
records its window, and logs what it cost the requests.

``Disruptions`` is the feature's hooks (``etcd_users.core.features``), called after the tool's own listeners, which
resolve the run's settings and start the local etcd first. At init the schedule is checked against the endpoints
(signals only on the local etcd the tool started, anything on other endpoints only with ``--etcd-disrupt-allowed``); at
test start a greenlet waits for each item's time (from the test start) and starts its action in a greenlet of its own,
on connections of its own (``Probe``), never on a worker. Each action is a window: requested, started and finished at
(unix seconds), ok, a line of result, the error label when it failed; the windows go to ``PREFIX_disruptions.json``
(with ``--csv PREFIX``), rewritten as each window closes and as its cost is known.

The cost, per request name (``etcd_users.judging.disruption_cost``), comes from the seconds the exact latency store
merges and from its timeline (``etcd_users.latency.timeline``: every process's successes to 10 ms, latencies in 100 ms
slots, failures timed by their request), which the span's gap, latencies and errors by etcd's label are read from
(``etcd_users.judging.disruption_span``): once the data up to the window's end is in, and again each second until the
P99 is back within 1.2x of before or ``RECOVERY_CAP_S`` have passed, then it is logged, one line per name. At test stop
the actions still running are interrupted (a member killed or frozen comes back), and the cost of windows still open is
logged with the data there is.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field

import gevent
import gevent.pool
import grpc

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.disruptions.actions import ActionError, Done, member_statuses
from etcd_users.features.disruptions.membership import remove_learners_left
from etcd_users.features.disruptions.schedule import Disruption, ScheduleError, check_allowed
from etcd_users.files import DISRUPTIONS_SCHEMA_VERSION, SUFFIXES
from etcd_users.judging import disruption_cost as costs
from etcd_users.judging import disruption_span as span
from etcd_users.latency.recent import RecentSeconds
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.timeline import Timeline
from etcd_users.members.member_figures import Figure, window_counters
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.disruption_windows import DisruptionWindows
from etcd_users.settings import EtcdSettings
from etcd_users.target.action_table import ACTIONS, ADD_LEARNER
from etcd_users.target.cluster import TargetCluster
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.probe import Probe

logger = logging.getLogger("etcd_users.disruptions.runner")  # the name users' log filters know

RECOVERY_CAP_S = 30  # the cost is logged at the latest this long after a window's end
COST_POLL_S = 1.0
KEEP_MARGIN_S = 10


def _seconds(recent: RecentSeconds, name: str) -> costs.PerSecond:
    return {second: costs.Second(*kept) for second, kept in recent.per_second(name).items()}


def disruptions_file(prefix: str) -> str:
    return f"{prefix}{SUFFIXES['disruptions']}"


@dataclass
class Window:
    """One disruption as it went; ``cost``: per request name, once known."""

    disruption: Disruption
    requested_at: float
    members: list[str] = field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None
    ok: bool | None = None
    result: str = ""
    error: str = ""
    cost: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    members_said: dict | None = None  # the worst member's counters over the window (``window_counters``), once known

    def record(self) -> dict:
        return {
            "item": self.disruption.text,
            "action": self.disruption.action,
            "members": self.members,
            "requested_at": round(self.requested_at, 3),
            "started_at": None if self.started_at is None else round(self.started_at, 3),
            "finished_at": None if self.finished_at is None else round(self.finished_at, 3),
            "ok": self.ok,
            "result": self.result,
            "error": self.error,
            "cost": self.cost,
            "steps": self.steps,
            "members_said": self.members_said,
        }


class DisruptionRun:
    """The schedule of one run, from its test start to its test stop."""

    def __init__(
        self, environment, settings: EtcdSettings, cluster, recorder, seconds: RecentSeconds, timeline: Timeline
    ) -> None:
        self.environment = environment
        self.settings = settings
        self.cluster = cluster  # the local etcd, or None
        self.recorder = recorder
        self.seconds = seconds
        self.timeline = timeline
        self.probe = Probe(settings)
        prefix = getattr(environment.parsed_options, "csv_prefix", None)
        self.path = disruptions_file(prefix) if prefix else None
        self.windows: list[Window] = []
        self.started_at = time.time()
        self._greenlets = gevent.pool.Group()
        self._scheduler: gevent.Greenlet | None = None

    def start(self) -> None:
        self._scheduler = gevent.spawn(self._schedule)
        self._write()

    def _schedule(self) -> None:
        for disruption in sorted(self.settings.disruptions.schedule, key=lambda d: d.at):
            gevent.sleep(max(0.0, self.started_at + disruption.at - time.time()))
            window = Window(disruption, time.time())
            self.windows.append(window)
            self._greenlets.spawn(self._act, window)

    def _act(self, window: Window) -> None:
        disruption = window.disruption
        done = Done()
        try:
            action = ACTIONS[disruption.action]
            act = action.load()
            if action.local_only:
                calls = (self.probe.run,) if action.calls_etcd else ()
                act(self.cluster, self.probe.run(member_statuses), disruption, done, *calls)
            elif action.calls_etcd:  # the Cluster API, retried from this greenlet
                act(self.probe.run(member_statuses), disruption, done, self.probe.run)
            elif action.outside:
                endpoints = [endpoint.url for endpoint in self.settings.endpoints]
                act(self.settings.disruptions.command(disruption.member), endpoints, disruption, done)
            else:
                self.probe.run(lambda pool: act(pool, disruption, done))
            window.ok = True
        except (ActionError, EndpointError) as error:
            window.ok, window.error = False, str(error)
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            window.ok, window.error = False, error_label(error)
        except gevent.GreenletExit:
            window.ok, window.error = False, "interrupted: the run stopped"
            raise
        except Exception as error:  # a disruption that fails never stops the run
            window.ok, window.error = False, f"{type(error).__name__}: {error}"
        finally:
            window.finished_at = time.time()
            window.started_at = done.started_at or window.finished_at
            window.members, window.result, window.steps = done.members, done.result, done.steps
            self._closed(window)
        self._watch_cost(window)
        self._watch_members(window)

    def _closed(self, window: Window) -> None:
        item = window.disruption.text
        if window.ok:
            logger.info("disruption %s: %s", item, window.result)
        else:  # a result besides the error (a command's output) goes with it
            result = f" ({window.result})" if window.result and window.result != window.error else ""
            logger.warning("disruption %s failed: %s%s", item, window.error, result)
        self._write()

    # -- the cost --

    def _watch_cost(self, window: Window) -> None:
        """Wait for the data up to the window's end (and its tail), then until the P99 is back or the cap; log the
        cost."""
        end = math.floor(window.finished_at + span.TAIL_S)
        while True:
            gevent.sleep(COST_POLL_S)
            covered = self.recorder.covered_until()
            if covered is None or math.floor(covered) - 1 < end:
                continue
            measured = self._cost(window, covered)
            last = math.floor(covered) - 1
            if all(c.recovery_s is not None or c.p99_before_ms is None for c, _ in measured) or (
                last >= end + RECOVERY_CAP_S
            ):
                self._log_cost(window, measured)
                return

    def _cost(self, window: Window, covered: float | None) -> list[tuple[costs.Cost, dict[str, int]]]:
        """Each name's cost and its errors by etcd's label, from the data in up to ``covered`` (unix time)."""
        last = None if covered is None else math.floor(covered) - 1
        covered = time.time() if covered is None else covered
        measured = []
        for name in sorted(set(self.seconds.names()) | set(self.timeline.names())):
            spanned = span.span_cost(self.timeline, name, window.started_at, window.finished_at, covered)
            seconds = _seconds(self.seconds, name)
            each = costs.cost(name, seconds, window.started_at, window.finished_at, last, spanned)
            measured.append((each, spanned.errors_by_label))
        return measured

    def _log_cost(self, window: Window, measured: list[tuple[costs.Cost, dict[str, int]]]) -> None:
        window.cost = []
        for each, labels in measured:
            logger.info("disruption %s cost: %s", window.disruption.text, costs.describe(each, labels))
            window.cost.append({**each._asdict(), "errors_by_label": labels})
        self._write()

    # -- what the members said --

    def _watch_members(self, window: Window) -> None:
        """The members' counters over the window, once some member's scrape follows its end (the metrics' poll), for up
        to ``RECOVERY_CAP_S``; logged after the cost."""
        deadline = time.time() + RECOVERY_CAP_S
        while not self._members_said(window) and time.time() < deadline:
            gevent.sleep(COST_POLL_S)

    def _members_said(self, window: Window) -> bool:
        """Log the members' counters over ``window`` when its scrapes are in (or there is no poll): whether done."""
        rows = run_context(self.environment).get(MembersSeen).member_rows
        if rows is None or window.members_said is not None:
            return True
        counted = window_counters(rows, window.started_at, window.finished_at)
        if counted is None:
            return False
        window.members_said = {name: figure.to_dict() for name, figure in counted.items()}
        said = ", ".join(f"{name.replace('_', ' ')} {_figure(figure)}" for name, figure in counted.items())
        logger.info("disruption %s, what the members counted: %s", window.disruption.text, said)
        self._write()
        return True

    # -- the file --

    def _write(self) -> None:
        if self.path is None:
            return
        document = {"schema": DISRUPTIONS_SCHEMA_VERSION, "windows": [w.record() for w in self.windows]}
        try:
            temporary = f"{self.path}.tmp"
            with open(temporary, "w") as out:
                json.dump(document, out, indent=1)
            os.replace(temporary, self.path)
        except OSError as error:
            logger.warning("could not write %s: %s", self.path, error)

    def stop(self) -> None:
        """Stop the schedule, bring back any member still down, log the cost of what has none yet."""
        if self._scheduler is not None:
            self._scheduler.kill(block=True)
        self._greenlets.kill(block=True, timeout=30)
        covered = self.recorder.covered_until()
        for window in self.windows:
            if window.finished_at is not None and not window.cost:
                self._log_cost(window, self._cost(window, covered))
            if window.finished_at is not None:
                self._members_said(window)
        self._remove_learners_left()
        self.probe.close()
        self._write()

    def _remove_learners_left(self) -> None:
        """The learners the run added and never promoted, out of the cluster before the next run (or said why not)."""
        added = [step for window in self.windows if window.disruption.action == ADD_LEARNER for step in window.steps]
        for line in remove_learners_left(self.probe.run, added):
            logger.info("disruption add-learner at the run's stop: %s", line)


def _figure(figure: Figure) -> str:
    """``3 (URL)``: the worst member's count and which; ``unknown`` when none of them gave it."""
    if figure.value is None:
        return "unknown"
    return f"{figure.value:g} ({figure.member})"


class Disruptions(FeatureHooks):
    """The feature's hooks: one ``DisruptionRun`` per run, on the master or the single process."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.run: DisruptionRun | None = None
        self.last: DisruptionRun | None = None  # the current or last run, whose windows the gates judge at quitting
        self.seconds: RecentSeconds | None = None
        self.timeline: Timeline | None = None

    def _check(self, settings: EtcdSettings) -> None:
        local = self.tool.get(TargetCluster).local
        disruptions = settings.disruptions
        check_allowed(disruptions.schedule, [e.url for e in settings.endpoints], local is not None, disruptions.allowed)

    def on_init(self, environment, runner=None, **_kwargs) -> None:
        plugin = self.tool
        context = run_context(environment)
        if context.role.is_worker or plugin.run_settings is None:
            return
        try:
            self._check(plugin.run_settings)
        except ScheduleError as error:
            plugin.fail(str(error))
        windows = context.get(DisruptionWindows)
        windows.so_far, windows.final = self.windows, self.final_windows
        self.seconds = RecentSeconds(0)
        plugin.get(LatencyRecorder).store.merged_listeners.append(self.seconds.add)
        self.timeline = plugin.get(LatencyRecorder).store.timeline = Timeline()

    def on_test_start(self, environment, **_kwargs) -> None:
        plugin = self.tool
        self._stop()
        self.last = None
        store = plugin.get(LatencyRecorder).store
        # every process records the timeline's parts of a run with disruptions (workers read the option the master
        # sent them)
        store.fine = bool(getattr(environment.parsed_options, "etcd_disrupt", ""))
        if run_context(environment).role.is_worker or self.seconds is None:
            return
        settings = plugin.run_settings
        if settings is None or not settings.disruptions.schedule:
            store.fine = False
            return
        try:
            self._check(settings)  # the web UI's form may bring another schedule
        except ScheduleError as error:
            logger.error("locust-etcd: error: %s", error)
            gevent.spawn(environment.runner.stop)
            return
        longest = max(max(d.duration, ACTIONS[d.action].lasts_s) for d in settings.disruptions.schedule)
        self.seconds.keep_s = costs.BEFORE_S + math.ceil(longest) + RECOVERY_CAP_S + KEEP_MARGIN_S
        store.fine = True
        self.timeline.clear()
        self.timeline.keep_s = math.ceil(longest) + RECOVERY_CAP_S + KEEP_MARGIN_S
        self.run = self.last = DisruptionRun(
            environment,
            settings,
            plugin.get(TargetCluster).local,
            plugin.get(LatencyRecorder),
            self.seconds,
            self.timeline,
        )
        self.run.start()
        logger.info("disruptions: %s (from the test start)", ", ".join(d.text for d in settings.disruptions.schedule))

    def on_test_stop(self, **_kwargs) -> None:
        self._stop()

    def on_quit(self, **_kwargs) -> None:
        self._stop()

    def windows(self) -> tuple[list[dict], bool]:
        """The current (or last) run's windows so far, and whether that run is over (the web UI's tab)."""
        if self.last is None:
            return [], False
        return [window.record() for window in self.last.windows], self.run is None

    def final_windows(self) -> list[dict]:
        """The last run's windows for its ``disrupt:`` gates, each with its cost: a run still going is stopped first,
        which measures the cost of a window without one from the seconds there are."""
        self._stop()
        return [window.record() for window in self.last.windows] if self.last is not None else []

    def _stop(self) -> None:
        if self.run is not None:
            self.run.stop()
            self.run = None
