"""The watchers' part of a run: a fresh tally in each process at the start, a progress line every few seconds
while watchers are open, workers' tallies sent with their reports, and one line at the end with the whole run's
events, events per second, lags and cancelled watchers (on the master, all the workers' together).

Every few seconds each process also notes whether watch events came (EtcdWatcherUser's, or EtcdWatchUser's
``watch`` rows) and whether it wanted a whole core meanwhile: a run whose client was busy most of the time events
came is client-bound, said by a warning when it first shows and at the end, and in the summary's ``watch``."""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time

import gevent

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import RunContext, run_context
from etcd_users.latency.client_cpu import cpu_percent, run_queue_wait
from etcd_users.run_state.watch_tally import WatchTally
from etcd_users.run_state.watchers import ProcessWatchers, WatchTallies
from etcd_users.transport import bridge as bridges

logger = logging.getLogger("etcd_users.watchers.run")  # the name users' log filters know
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

REPORT_KEY = "etcd_watchers"
PROGRESS_SECONDS = 2.0
FAN_OUT_ROW = ("watch", "etcd")  # EtcdWatchUser's row: one request per event
WARN_AFTER_INTERVALS = 3  # intervals with events before a client-bound run is told during the run


class WatchersRun(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.reports: dict[str, dict] = {}  # a master's workers' tallies, the latest of each
        self._progress: gevent.Greenlet | None = None
        self.context: RunContext | None = None

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        context = self.context = run_context(environment)  # a worker reports to its master before any run starts
        context.get(WatchTallies).live = lambda: self.total(context)

    def on_test_start(self, environment, **_kwargs) -> None:
        context = self.context = run_context(environment)
        self.reports = {}
        if context.role.is_master:
            return
        context.put(ProcessWatchers())
        if self._progress is None:
            self._progress = gevent.spawn(self._log_progress, environment, context)

    def _log_progress(self, environment, context: RunContext) -> None:
        stats = environment.runner.stats
        warned = False
        events = 0
        lag = _LoopLag()
        wall, cpu, waited = time.time(), time.process_time(), run_queue_wait()
        while True:
            gevent.sleep(PROGRESS_SECONDS)
            tally = context.get(ProcessWatchers).tally
            now, used, waiting = time.time(), time.process_time(), run_queue_wait()
            fan_out = stats.entries.get(FAN_OUT_ROW)
            seen = tally.events + (fan_out.num_requests if fan_out is not None else 0)
            demand = cpu_percent(used - cpu, now - wall)
            if demand is not None and waiting is not None and waited is not None:
                demand += cpu_percent(waiting - waited, now - wall) or 0.0
            tally.count_interval(seen > events, demand, lag.seconds())
            if seen > events:  # events came: the transport runs (a run without them never starts one here)
                lag.probe(bridges.bridge())
            events, wall, cpu, waited = seen, now, used, waiting
            if tally.watchers:
                logger.info("%s", tally.line())
            if not warned and tally.event_intervals >= WARN_AFTER_INTERVALS and tally.client_bound:
                logger.warning("%s", tally.client_line())
                warned = True

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self._progress is not None:
            self._progress.kill(block=False)
            self._progress = None
        context = run_context(environment)
        if not context.role.is_master and context.get(ProcessWatchers).latencies is not None:
            # the users' cancels are posted to the loop thread: once this runs there, they have added their counts
            try:
                bridges.bridge().run(_flushed)
            except Exception:  # a bridge that is closing: the counts are what they are
                logger.debug("watchers' counts not flushed", exc_info=True)

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        watchers = self.context.get(ProcessWatchers) if self.context is not None else None
        if watchers is not None and (watchers.latencies is not None or watchers.tally.event_intervals):
            data[REPORT_KEY] = watchers.tally.to_dict()

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        if REPORT_KEY in data:
            self.reports[client_id] = data[REPORT_KEY]

    def on_quitting(self, environment) -> None:
        context = run_context(environment)
        if context.role.is_worker:
            return
        tally = context.get(WatchTallies).final = self.total(context)  # for the run's summary
        if tally.watchers or tally.cancelled:
            _console.info("%s", tally.line())
        if tally.client_bound:
            _console.warning("%s", tally.client_line())

    def total(self, context: RunContext) -> WatchTally:
        """The run's tally: the process's own, or on a master its workers' together."""
        if not context.role.is_master:
            return context.get(ProcessWatchers).tally
        tally = WatchTally()
        for report in self.reports.values():
            tally.add(WatchTally.from_dict(report))
        return tally


class _LoopLag:
    """How late the transport's loop runs a callback posted to it: the backlog a received response waits behind."""

    def __init__(self) -> None:
        self._sent: float | None = None
        self._lag: float | None = None

    def probe(self, bridge: bridges.Bridge) -> None:
        sent = self._sent = time.perf_counter()
        self._lag = None
        bridge.post(self._arrived, sent)

    def _arrived(self, sent: float) -> None:  # on the loop thread
        if sent == self._sent:
            self._lag = time.perf_counter() - sent

    def seconds(self) -> float | None:
        """The last probe's lag; a probe not run yet counts as late as it is. None without a probe."""
        if self._sent is None:
            return None
        return self._lag if self._lag is not None else time.perf_counter() - self._sent


async def _flushed() -> None:
    return None
