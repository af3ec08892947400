"""What Locust's events ask of the exact latencies, on a master, a worker or a single process.

``etcd_users.core.plugin`` wires these methods to the events. Workers ship the seconds recorded since their last report
with Locust's own report (``report_to_master``); the master merges them. The master (or the single process)
writes the files with ``--csv PREFIX``, refreshed every few seconds and completed at ``quit``, once the workers'
last reports are in. On a master a second is written when it is 5 s old; a worker report later than that adds a
second row for its second.

Read it with ``snapshot()`` (rows as in the CSV) or ``histogram(type, name, series)``.
"""

from locust import runners as locust_runners
from locust.env import Environment
from locust.exception import RPCError

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.lock
from hdrh.histogram import HdrHistogram

from etcd_users.core.role import Role
from etcd_users.files import SERVICE
from etcd_users.latency import store
from etcd_users.latency.store import LatencyRow, LatencyStore
from etcd_users.latency.writer import LatencyFiles

logger = logging.getLogger(__name__)

REPORT_KEY = "etcd_latency"
REFRESH_SECONDS = 2.0
LAST_REPORTS_TIMEOUT_SECONDS = 10.0
# On the master a second is written once every worker has had the time to report it (reports every 3 s).
LATE_GRACE_SECONDS = 2.0


class LatencyRecorder:
    """The exact latencies of one environment (one per process): a store, its files, and their schedule."""

    def __init__(self, environment: Environment | None = None) -> None:
        self.environment = environment  # set by the plugin at init: the recorder listens from the locustfile's import
        self.store = LatencyStore()
        self.record = self.store.record  # the ``request`` listener: the store's, with nothing in between
        self._files: LatencyFiles | None = None
        self._refresher: gevent.Greenlet | None = None
        self._late_reports_received = False
        self._late_reports_lock = gevent.lock.Semaphore()
        self._reported_at: dict[str, float] = {}  # per worker, when its last report was made (its "at")
        # called before this process's recorded seconds are read: requests reported in batches (the loop engine's)
        # reach the store first, so that "covered until now" holds for them too; each returns the time before which
        # every request it reports has been handed to the request listeners (None: it reported none)
        self.before_collect: list[Callable[[], float | None]] = []

    # -- reading: the merged figures so far --

    @property
    def first_request(self) -> float | None:
        return self.store.first_request

    @property
    def last_request(self) -> float | None:
        return self.store.last_request

    def snapshot(self) -> list[LatencyRow]:
        """One row per (type, name, series), sorted, then the ``Aggregated`` row of all service histograms."""
        self.collect()
        return self.store.snapshot()

    def histogram(self, request_type: str, name: str, series: str = SERVICE) -> HdrHistogram | None:
        """The run's histogram of one key (microseconds; do not modify it), None before its first success."""
        self.collect()
        return self.store.histogram(request_type, name, series)

    def covered_until(self) -> float | None:
        """A time before which every request recorded anywhere is merged here (after folding this process's own): on a
        single process, the time its requests reported in batches have reached (``apply_pending``); on a master the
        oldest of its workers' last reports, None while a worker has sent none this run. None on a worker."""
        if self._is_worker():
            return None
        until = self.collect()
        runner = self.environment.runner if self.environment is not None else None
        if not Role.of(runner).is_master:
            return until
        workers = [node.id for node in list(runner.clients.values()) if node.state != locust_runners.STATE_MISSING]
        reported = [self._reported_at.get(worker) for worker in workers]
        if any(at is None for at in reported):
            return None
        return min(reported, default=store._now())

    def apply_pending(self) -> float:
        """Hand every request of this process reported in batches so far to the request listeners (Locust's
        statistics among them); returns the time (``time.time()``) before which every request of this process that
        ended has reached them, and none after: where a count of Locust's failures taken now begins and ends."""
        applied = [until for until in (flush() for flush in self.before_collect) if until is not None]
        return min(applied) if applied else store._now()

    def collect(self) -> float | None:
        """Fold this process's recorded seconds into the run's histograms (not on workers: theirs go to the master);
        returns the time before which every request of this process that ended is in them (None on a worker)."""
        if self._is_worker():
            return None
        until = self.apply_pending()
        self._receive_late_last_reports()
        self.store.fold_recorded()
        return until

    # -- output --

    def flush(self, final: bool = False) -> None:
        """Write the seconds that are complete (all of them when ``final``) and rewrite the summary."""
        self.collect()
        if final:
            horizon = None
        elif Role.of(self.environment.runner).is_master:
            horizon = int(store._now() - locust_runners.WORKER_REPORT_INTERVAL - LATE_GRACE_SECONDS)
        else:
            horizon = int(store._now())  # the current second may still grow
        sealed = self.store.seal(horizon)
        files = self._latency_files()
        if files is not None:
            files.append(sealed)
            files.write_summary(self.store.snapshot(), self.store.first_request, self.store.last_request)

    def _latency_files(self) -> LatencyFiles | None:
        if self._files is None:
            prefix = getattr(self.environment.parsed_options, "csv_prefix", None)
            if not prefix or self._is_worker():
                return None
            self._files = LatencyFiles(prefix, self.store.started_at)
        return self._files

    def close(self) -> None:
        """Stop the periodic refresh and close the files (a later flush appends to them)."""
        if self._refresher is not None:
            self._refresher.kill(block=False)
            self._refresher = None
        if self._files is not None:
            self._files.close()

    def _refresh_forever(self) -> None:
        while True:
            gevent.sleep(REFRESH_SECONDS)
            try:
                self.flush()
            except Exception:
                logger.exception("could not refresh the latency files")

    # -- the run's events --

    def on_test_start(self) -> None:
        if self._files is not None:
            self.flush(final=True)  # the previous run's last seconds, before its files are replaced
            self._files.close()
            self._files = None  # the next flush starts new files
        self.store.reset()
        self._reported_at = {}
        self._late_reports_received = False
        if not self._is_worker() and self._refresher is None:
            self._refresher = gevent.spawn(self._refresh_forever)

    def on_test_stop(self) -> None:
        # A master's workers still have their last report to send (on "quit", or within 3 s of "stop").
        self.flush(final=not Role.of(self.environment.runner).is_master)

    def on_quitting(self) -> None:
        self.flush()

    def on_quit(self) -> None:
        # After runner.quit(): the workers' last reports are in.
        self.flush(final=True)
        self.close()

    def on_report_to_master(self, data: dict[str, Any]) -> None:
        data[REPORT_KEY] = self.store.export_report()

    def on_worker_report(self, data: dict[str, Any], client_id: str | None = None) -> None:
        report = data.get(REPORT_KEY)
        if report:
            self.store.merge_report(report)
            at = report.get("at")
            if client_id is not None and isinstance(at, (int, float)):
                self._reported_at[client_id] = max(at, self._reported_at.get(client_id, at))

    def on_reset_stats(self) -> None:
        if not self._is_worker():
            self.collect()
            self.store.reset_summary()

    def on_spawning_complete(self) -> None:
        if self.environment.reset_stats:
            self.on_reset_stats()  # --reset-stats: Locust resets its stats once users are spawned

    # -- a master's workers' last reports --

    def _receive_late_last_reports(self) -> None:
        """On a master that quit, take the workers' last reports that came after Locust stopped listening.

        On quit Locust's master sends "quit" to the workers, listens 0.5 s for their last report, then kills its
        listener: a worker slower than that (a loaded machine) loses its last seconds, in Locust's stats as in these
        files. Once that listener is gone, listen on its socket until each worker has said "quit" (its last message).
        Any reader after runner.quit() (files, snapshot, SLA gates) gets the run's complete figures.
        """
        runner = self.environment.runner
        if self._late_reports_received or not Role.of(runner).is_master or len(runner.greenlet):
            return  # done, not a master, or its own listener still runs
        with self._late_reports_lock:
            if not self._late_reports_received:
                self._receive_until_workers_quit(runner)
                self._late_reports_received = True

    def _receive_until_workers_quit(self, runner: locust_runners.MasterRunner) -> None:
        waiting = {node.id for node in runner.clients.values() if node.state != locust_runners.STATE_MISSING}
        deadline = time.monotonic() + LAST_REPORTS_TIMEOUT_SECONDS
        while waiting:
            received = None
            with gevent.Timeout(max(0.0, deadline - time.monotonic()), False):
                try:
                    received = runner.server.recv_from_client()
                except RPCError as error:
                    logger.warning("could not receive the workers' last reports: %s", error)
            if received is None:
                break
            message = received[1]
            if message.type == "stats":
                self.environment.events.worker_report.fire(client_id=message.node_id, data=message.data)
            elif message.type == "quit":
                waiting.discard(message.node_id)
                runner.clients.pop(message.node_id, None)
        if waiting:
            logger.warning("%d worker(s) sent no last report: their last seconds are missing", len(waiting))

    def _is_worker(self) -> bool:
        return Role.of(self.environment.runner).is_worker
