"""The master's watch over its workers: a worker that goes silent mid-run is news, not an INFO line.

Locust marks a worker "missing" after three heartbeats it did not send (about 3 s), clears the users it counted for
it and lets the run go on with the others. The watch keeps each worker's users and last heartbeat as the run goes,
so that when one goes missing it can say what went with it: a warning at once, the ``lost_workers`` of the run's
summary, a line at the end of the run and, when ``--etcd-sla`` judges the run, a failed verdict among the gates' (exit
code 3); the gates' hooks (``etcd_users.features.gates.hooks``) make it and add its verdict.
Without gates the exit code stays the run's: the gates are the run's verdict, and a run without them has none.
"""

from locust.runners import HEARTBEAT_LIVENESS, STATE_MISSING, MasterRunner

import logging
import time

import gevent

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.judging.sla import Result
from etcd_users.judging.sla_specs import Gate
from etcd_users.members import lost_workers
from etcd_users.members.lost_workers import WORKERS, LostWorker
from etcd_users.run_state.gate_state import GateState

logger = logging.getLogger("etcd_users.reporting.worker_watch")  # the name users' log filters know
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

POLL_S = 0.5  # Locust checks heartbeats once a second
# the verdict beside the --etcd-sla gates: no worker lost
WORKERS_GATE = Gate(text=WORKERS, name=None, metric=WORKERS, percentile=None, op="==", threshold=0.0, unit="")


class WorkerWatch(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.lost: list[LostWorker] = []  # the current (or last) run's
        self.workers = 0  # the workers the current (or last) run had
        self._started = 0.0
        self._users: dict[str, int] = {}  # each worker's users as last counted before it was lost
        self._heard: dict[str, float] = {}  # each worker's last heartbeat (unix seconds)
        self._greenlet: gevent.Greenlet | None = None
        self._runner: MasterRunner | None = None

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        if run_context(environment).role.is_master:
            self._runner = runner
            environment.events.heartbeat_sent.add_listener(self._on_heartbeat)

    def _on_heartbeat(self, client_id, timestamp, **_kwargs) -> None:
        self._heard[client_id] = timestamp
        for index, lost in enumerate(self.lost):
            if lost.worker == client_id and lost.returned_at is None:
                self.lost[index] = lost._replace(returned_at=timestamp)
                logger.warning("worker %s is back at %.0f s", client_id, timestamp - self._started)

    def on_test_start(self, environment, **_kwargs) -> None:
        if self._runner is None:
            return
        self._stop()
        self.lost, self.workers, self._users = [], 0, {}
        run_context(environment).get(
            GateState
        ).lost_workers = self.lost  # the same list: the run's summary reads it there
        self._started = time.time()
        self._greenlet = gevent.spawn(self._watch)

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self._greenlet is not None:
            self.look(time.time())  # a worker lost in the last second
        self._stop()

    def _stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _watch(self) -> None:
        while True:
            self.look(time.time())
            gevent.sleep(POLL_S)

    def look(self, now: float) -> None:
        """Each worker's users while it runs; a worker newly missing is lost."""
        if self._runner is None:
            return
        lost_ids = {lost.worker for lost in self.lost}
        for client in list(self._runner.clients.values()):
            if client.state != STATE_MISSING:
                if client.id not in lost_ids:
                    self._users[client.id] = client.user_count
                continue
            if client.id in lost_ids:
                continue
            at = self._heard.get(client.id, now - HEARTBEAT_LIVENESS)
            lost = LostWorker(
                worker=client.id,
                at=at,
                at_s=max(0.0, at - self._started),
                users=self._users.get(client.id, 0),
                run_users=sum(users for worker, users in self._users.items() if worker not in lost_ids),
            )
            self.lost.append(lost)
            lost_ids.add(client.id)
            logger.warning(lost_workers.warning_line(lost, now - at, self._user_rate()))
        self.workers = max(self.workers, len(self._users))

    def _user_rate(self) -> float:
        settings = self.tool.run_settings
        return settings.user_rate if settings is not None else 0.0

    def verdict(self) -> Result | None:
        """The failed verdict of a run that lost workers; None when it lost none."""
        if not self.lost:
            return None
        shown = lost_workers.verdict_text(self.lost, self.workers, self._user_rate())
        return Result(WORKERS_GATE, float(len(self.lost)), False, shown)

    def on_quitting(self, environment) -> None:
        self._stop()

    def add_verdict(self, results: list[Result]) -> None:
        """With gates, a run that lost workers fails among them (and so in the exit code)."""
        result = self.verdict()
        settings = self.tool.run_settings
        if result is None or settings is None or not settings.gates.sla or not self.tool.ran:
            return
        results.append(result)
        logger.error("SLA: %s: %s", WORKERS, result.shown)

    def on_quit(self, **_kwargs) -> None:
        settings = self.tool.run_settings
        if self.lost and (settings is None or not settings.gates.sla):  # with gates, the verdict's line says it
            _console.info(lost_workers.end_line(self.lost, self.workers, self._user_rate()))
