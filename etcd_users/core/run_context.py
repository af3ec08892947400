"""The state of one process for a run, kept on Locust's environment (``environment.etcd_run``): ``run_context``.

One context per process and environment, made at Locust's ``init`` (``attach``) with the process's ``Role``, decided
there once from the runner. It holds what the process's parts share during a run instead of module globals:

- the session (settings, key space, connections), opened by the first user that needs it, dropped when a new run
  brings other options (the web UI's form), closed at quit;
- the audit's record of the current run (``etcd_users.features.audit.record``), made at each run's start;
- the watchers' state of the process (``etcd_users.features.watchers.state``), made afresh at each run's start;
- the bridge to the loop thread: one per process (its native thread is the process's), made on first use after any
  fork (``--processes``), reached through the context;
- the master's (or single process's) monitoring of the members during the current run (``RunMonitoring``);
- what one feature leaves for the others: the members as found at start-up and their rows during the run, etcd's
  NOSPACE alarm, the call that captures the members at a breach, the gates' results, the workers lost, the watchers'
  tally, the disruptions' windows, the serializable reads' staleness.

The context wraps ``RunMonitoring`` rather than absorbing it: the context lasts as long as the process and spans its
runs, and exists in every process; the monitoring is one run's, of the process that judges, started and stopped with
that run, and it owns greenlets (the poller, the compactor) that the context's other parts never touch.
"""

from locust.exception import StopUser

import logging
from collections.abc import Callable

import gevent.lock

from etcd_users.core.role import Role
from etcd_users.features.audit.record import RunRecord
from etcd_users.features.audit.staleness import MemberStaleness
from etcd_users.features.engine.results import LoopResults
from etcd_users.features.gates.sla import Result
from etcd_users.features.monitoring.during_run import RunMonitoring
from etcd_users.features.monitoring.lost_workers import LostWorker
from etcd_users.features.monitoring.preflight import MemberReport
from etcd_users.features.monitoring.space import SpaceWatch
from etcd_users.features.watchers.state import ProcessWatchers
from etcd_users.features.watchers.tally import WatchTally
from etcd_users.session import Session
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import EndpointPool

logger = logging.getLogger(__name__)

ATTRIBUTE = "etcd_run"


def _no_windows() -> tuple[list[dict], bool]:
    return [], False


def _no_breach(why: str) -> None:
    """``on_breach`` without the members' monitoring: a breach sets nothing off."""


class RunContext:
    def __init__(self, environment, role: Role) -> None:
        self.environment = environment
        self.role = role
        self.record: RunRecord | None = None  # the audit's record of the current run; None: the audit is off
        self.watchers = ProcessWatchers()
        self.monitoring: RunMonitoring | None = None  # the members' during the current run, where it is judged
        # what the features leave for each other (the run's summary, the gates, the web UI)
        self.preflight: list[MemberReport] = []  # the members as the pre-flight found them at start-up
        # the current (or last) run's rows of the members' /metrics, kept past the run's stop for the gates and the
        # summary; None when the run polled none (--etcd-metrics-interval 0)
        self.member_rows: list[dict] | None = None
        self.space_watch: SpaceWatch | None = None  # the current (or last) run's db against quota and alarms
        # a gate failed during the run (a shape's live judging): the members' side, once per run
        self.on_breach: Callable[[str], None] = _no_breach
        self.gate_results: list[Result] = []  # the gates' results of the current (or last) run, once judged
        self.lost_workers: list[LostWorker] = []  # the master's workers lost during the current (or last) run
        self.watch_tally: WatchTally | None = None  # the whole run's watchers' tally, once the run is judged
        # the watchers' tally so far: the process's own, or a master's workers' as last reported (the web UI, the
        # exporter)
        self.live_watch_tally: Callable[[], WatchTally] = WatchTally
        # the disruptions' windows: so far, with whether their run is over (the web UI); final, each with its cost,
        # stopping a run still going (the gates at quitting)
        self.disruption_windows: Callable[[], tuple[list[dict], bool]] = _no_windows
        self.final_disruption_windows: Callable[[], list[dict]] = list
        # the serializable reads' staleness per member, the workers' included (the stale: gates at quitting)
        self.final_staleness: Callable[[], dict[str, MemberStaleness]] = dict
        self._session: Session | None = None
        self._loop_results: LoopResults | None = None  # the ready workloads' results on the loop, for the session
        self._session_lock = gevent.lock.Semaphore()
        self._session_error = ""

    @property
    def alarm(self) -> str | None:
        """etcd's NOSPACE alarm as the current (or last) run knows it, in one short line; None without one."""
        return self.space_watch.alarm if self.space_watch is not None else None

    @property
    def bridge(self) -> bridge.Bridge:
        """The process's bridge to the loop thread, made on first use."""
        return bridge.bridge()

    def session(self) -> Session:
        """The process's session for the environment's current options, opened on first use."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    try:
                        self._session = Session(settings_from_options(self.environment.parsed_options))
                    except (SettingsError, EndpointError) as error:
                        # a worker's users cannot start (the master checked the endpoints, but this process may not
                        # reach them): one line for the process, not a traceback per user
                        if str(error) != self._session_error:
                            logger.error("locust-etcd: error: %s", error)
                            self._session_error = str(error)
                        raise StopUser() from None
        return self._session

    def users_pool(self) -> EndpointPool | None:
        """The pool of this process's users once they opened their session (never opens one): where their requests go
        now, and the members it left out. None on a master, or before any user."""
        session = self._session
        return session.pool if session is not None else None

    def loop_results(self) -> LoopResults:
        """Where the session's users on the loop thread add their results (``etcd_users.features.engine``), made on first use."""
        if self._loop_results is None:
            self._loop_results = LoopResults(self.bridge, self.environment, lambda: self.watchers)
        return self._loop_results

    def flush_loop_results(self) -> None:
        """Apply every result of the users on the loop thread so far (before anything reads the run's figures)."""
        if self._loop_results is not None:
            self._loop_results.flush()

    def drop_session_if_changed(self, settings: EtcdSettings) -> None:
        """A new run may come with new options: the next user reconnects with them."""
        session = self._session
        if session is not None and session.settings != settings:
            self._session = None
            self._close_loop_results()
            session.close()

    def close_session(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        try:
            self._close_loop_results()
            session.close()
        except Exception as error:  # closing is best effort: the run is over
            logger.debug("closing etcd connections: %s", error)

    def _close_loop_results(self) -> None:
        results, self._loop_results = self._loop_results, None
        if results is not None:
            results.close()


def attach(environment, runner) -> RunContext:
    """At Locust's ``init``: the process's context, with its role decided from ``runner``."""
    context = RunContext(environment, Role.of(runner))
    setattr(environment, ATTRIBUTE, context)
    return context


def run_context(environment) -> RunContext:
    """The process's context; made from the environment's runner if ``init`` has not made it (a test's environment)."""
    context = getattr(environment, ATTRIBUTE, None)
    return context if context is not None else attach(environment, environment.runner)
