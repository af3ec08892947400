"""The watchers' part of a run: a fresh tally in each process at the start, a progress line every few seconds
while watchers are open, workers' tallies sent with their reports, and one line at the end with the whole run's
events, events per second, lags and cancelled watchers (on the master, all the workers' together)."""

import locust  # noqa: F401  (gevent's monkey patching must come first)
from locust.runners import MasterRunner, WorkerRunner

import logging

import gevent

from etcd_users.features import FeatureHooks
from etcd_users.transport import bridge as bridges
from etcd_users.watchers import state
from etcd_users.watchers.tally import WatchTally

logger = logging.getLogger(__name__)
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

REPORT_KEY = "etcd_watchers"
PROGRESS_SECONDS = 2.0


class WatchersRun(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.reports: dict[str, dict] = {}  # a master's workers' tallies, the latest of each
        self._progress: gevent.Greenlet | None = None
        self._master = False

    def on_test_start(self, environment, **_kwargs) -> None:
        self._master = isinstance(environment.runner, MasterRunner)
        self.reports = {}
        if self._master:
            return
        state.reset()
        if self._progress is None:
            self._progress = gevent.spawn(self._log_progress)

    def _log_progress(self) -> None:
        while True:
            gevent.sleep(PROGRESS_SECONDS)
            tally = state.current.tally
            if tally.watchers:
                logger.info("%s", tally.line())

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self._progress is not None:
            self._progress.kill(block=False)
            self._progress = None
        if not self._master and state.current.latencies is not None:
            # the users' cancels are posted to the loop thread: once this runs there, they have added their counts
            try:
                bridges.bridge().run(_flushed)
            except Exception:  # a bridge that is closing: the counts are what they are
                logger.debug("watchers' counts not flushed", exc_info=True)

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        if state.current.latencies is not None:
            data[REPORT_KEY] = state.current.tally.to_dict()

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        if REPORT_KEY in data:
            self.reports[client_id] = data[REPORT_KEY]

    def on_quitting(self, environment) -> None:
        if isinstance(environment.runner, WorkerRunner):
            return
        tally = self.total()
        if tally.watchers or tally.cancelled:
            _console.info("%s", tally.line())

    def total(self) -> WatchTally:
        if not self._master:
            return state.current.tally
        tally = WatchTally()
        for report in self.reports.values():
            tally.add(WatchTally.from_dict(report))
        return tally


async def _flushed() -> None:
    return None
