"""The run's life cycle: every Locust event the tool handles, wired in one place, in the order a run meets them.

``install(events)`` is called once per process when the users are imported (``etcd_users.users``), before Locust
creates its runner. That order matters once: Locust fires ``quitting`` in reverse, so the master's own listener
(registered with its runner, after ours) tells the workers to quit and takes their last reports before the gates
are judged here. ``on_quitting`` makes sure of it even when installed later.
"""

from locust.event import Events
from locust.runners import MasterRunner, WorkerRunner

import logging
import signal
import sys
import time

import gevent
import greenlet

from etcd_users import compaction, session
from etcd_users.arguments import add_option_group
from etcd_users.cluster import ClusterError
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.reporting import end_of_run, final_stats, preflight, server_metrics, sla, space, webui
from etcd_users.settings import (
    OPTIONS,
    OPTIONS_DESCRIPTION,
    OPTIONS_TITLE,
    EtcdSettings,
    SettingsError,
    SlaError,
    parse_gates,
    settings_from_options,
)
from etcd_users.target_cluster import TargetCluster, check_prefix_free, delete_prefix, with_probe
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError
from etcd_users.user_classes import check_class_names, no_class_message, no_class_named

logger = logging.getLogger(__name__)

_INSTALLED = "etcd_users_plugin"


def install(events: Events, *, etcd: bool = True) -> "EtcdPlugin":
    """Wire the tool into ``events`` (once; a second call returns the first plugin).

    ``etcd=False`` installs the exact latencies alone, for a locustfile whose users are not etcd's (the tests' own
    synthetic users): no ``--etcd-*`` options, no cluster, no gates.
    """
    installed = getattr(events, _INSTALLED, None)
    if installed is not None:
        return installed
    plugin = EtcdPlugin(etcd)
    setattr(events, _INSTALLED, plugin)
    if etcd:
        events.init_command_line_parser.add_listener(plugin.add_options)
    events.init.add_listener(plugin.on_init)
    events.request.add_listener(plugin.recorder.record)  # the hot path: the latency store's own method
    events.test_start.add_listener(plugin.on_test_start)
    events.spawning_complete.add_listener(plugin.on_spawning_complete)
    events.reset_stats.add_listener(plugin.on_reset_stats)
    events.report_to_master.add_listener(plugin.on_report_to_master)
    events.worker_report.add_listener(plugin.on_worker_report)
    events.test_stop.add_listener(plugin.on_test_stop)
    events.quitting.add_listener(plugin.on_quitting)
    events.quit.add_listener(plugin.on_quit)
    return plugin


class EtcdPlugin:
    """The state of one process across runs, and what each event does with it."""

    def __init__(self, etcd: bool) -> None:
        self.etcd = etcd
        self.environment = None
        self.recorder = LatencyRecorder()
        self.target = TargetCluster()
        # the master's (or single process's) settings of the current run; workers take theirs from their options
        self.run_settings: EtcdSettings | None = None
        self.poller: server_metrics.MetricsPoller | None = None
        self.space_watch: space.SpaceWatch | None = None  # the current (or last) run's db against quota and alarms
        self.compactor: compaction.Compactor | None = None  # --etcd-compact-interval
        self.ran = False  # a test started in this process, on a master or single process: there is a run to judge
        self.results: list[sla.Result] = []  # judged at quitting, printed at quit
        self.tabs: webui.EtcdTabs | None = None  # the web UI's etcd tabs, on a master or single process with one
        self.shown_host: str | None = None  # the endpoints this process shows as Locust's host
        self.started_at = time.time()  # a file older than this is a previous run's

    # -- start-up --

    def add_options(self, parser, **_kwargs) -> None:
        add_option_group(parser, OPTIONS_TITLE, OPTIONS_DESCRIPTION, OPTIONS)
        check_class_names(parser)  # a misspelt class: the nearest name and the list, exit 2, before Locust's own

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        """Check the options and the cluster before anything runs; bad input ends the process with one line."""
        self.environment = environment
        self.recorder.environment = environment
        _interrupt_main_greenlet_on_ctrl_c(greenlet.getcurrent())  # Locust fires init in its main greenlet
        if not self._has_etcd_options(environment) or isinstance(runner, WorkerRunner):
            return  # workers take their options from the master when a run starts
        options = environment.parsed_options
        available = environment.available_user_classes or {}
        if no_class_named(options.user_classes, available, options.headless or options.autostart):
            self._fail(no_class_message(available, environment.parsed_locustfiles or ()))
        try:
            settings = self.target.settings(environment.parsed_options)
            check_prefix_free(settings)
        except (SettingsError, EndpointError, ClusterError) as error:
            self._fail(str(error))
        self.run_settings = settings
        self._show_endpoints_as_host(environment, settings)
        # informs only (versions, db size against quota, fsync P99 under a short burst); never stops the run
        preflight.report(settings, environment.parsed_options, with_probe)
        if web_ui is not None:
            self.tabs = webui.install(environment, web_ui, self.recorder, lambda: self.run_settings, lambda: self.alarm)

    # -- a run --

    def on_test_start(self, environment, **_kwargs) -> None:
        """A new run may come with new options (the web UI's form, or the master's): reconnect with them."""
        self.recorder.on_test_start()
        if not self._has_etcd_options(environment):
            return
        is_worker = isinstance(environment.runner, WorkerRunner)
        self.ran = self.ran or (environment.runner is not None and not is_worker)
        options = environment.parsed_options
        try:
            # the master resolves the endpoints before it sends the options to the workers
            settings = settings_from_options(options) if is_worker else self.target.settings(options)
        except (SettingsError, ClusterError) as error:
            logger.error("locust-etcd: error: %s", error)
            if environment.runner is not None:
                gevent.spawn(environment.runner.stop)
            return
        if not is_worker:
            self.run_settings = settings
            self._show_endpoints_as_host(environment, settings)
            if self.tabs is not None:
                self.tabs.on_test_start()
            self._stop_polling()
            self._stop_compacting()
            self.space_watch = space.SpaceWatch(settings, environment)
            self.poller = server_metrics.start_polling(environment, settings, self.space_watch)
            self.compactor = compaction.start_compacting(settings)
        session.drop_if_changed(environment, settings)

    def on_spawning_complete(self, **_kwargs) -> None:
        self.recorder.on_spawning_complete()

    def on_reset_stats(self, **_kwargs) -> None:
        self.recorder.on_reset_stats()

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_report_to_master(data)

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_worker_report(data)

    def on_test_stop(self, environment, **_kwargs) -> None:
        self._stop_polling()  # with a last row per member: the state at the end
        self._stop_compacting()
        self.recorder.on_test_stop()

    # -- the end --

    def on_quitting(self, environment, **_kwargs) -> None:
        """Judge the gates on the final figures: the exit code is decided right after this event."""
        runner = environment.runner
        if isinstance(runner, MasterRunner) and len(runner.greenlet):
            runner.quit()  # the workers' last reports first (Locust's own listener would do it after this one)
        self.results = self._judge(environment) if self.etcd and self.ran else []
        self.recorder.on_quitting()
        if not isinstance(runner, WorkerRunner):
            final_stats.at_quitting(environment)  # with --json(-file): before Locust clears its per-name figures

    def on_quit(self, **_kwargs) -> None:
        # on quit, not quitting: Locust fires quitting before it stops users, whose calls would then fail
        self.recorder.on_quit()  # the exact files, whole: the workers' last reports are in
        self._end_of_run()
        sla.print_results(self.results)  # after Locust's summary tables, where a pipeline's log ends
        self._stop_polling()  # before the clean-up and the local etcd's end
        self._stop_compacting()
        if not self.etcd:
            return
        session.close_sessions()
        if self.run_settings is not None and self.run_settings.cleanup:
            try:
                delete_prefix(self.run_settings)
            except (EndpointError, SettingsError) as error:
                logger.error("locust-etcd: could not delete the keys under the prefix: %s", error)
        bridge.close_bridge()
        self.target.stop_local()

    def _end_of_run(self) -> None:
        """After Locust's summary, on a master or single process: _stats.csv completed, the exact table, the files."""
        environment = self.environment
        if environment is None or isinstance(environment.runner, WorkerRunner):
            return
        final_stats.at_quit(environment)
        options = environment.parsed_options
        json_file = getattr(options, "json_file", None)
        reports = (getattr(options, "html_file", None), f"{json_file}.json" if json_file else None)
        paths = end_of_run.run_files(getattr(options, "csv_prefix", None), reports, since=self.started_at)
        end_of_run.print_summary(self.recorder.snapshot(), paths)

    # -- helpers --

    def _show_endpoints_as_host(self, environment, settings: EtcdSettings) -> None:
        """Locust's header shows the host: the endpoints the run loads, unless a host of one's own was given."""
        host = ",".join(endpoint.url for endpoint in settings.endpoints)
        if not environment.host or environment.host == self.shown_host:
            environment.host = self.shown_host = host

    def _has_etcd_options(self, environment) -> bool:
        return self.etcd and hasattr(environment.parsed_options, "etcd_endpoints")

    def _judge(self, environment) -> list[sla.Result]:
        if isinstance(environment.runner, WorkerRunner):
            return []
        try:
            gates = parse_gates(getattr(environment.parsed_options, "etcd_sla", "") or "")
        except SlaError as error:  # only the web UI's form can get here; the command line is checked at start
            logger.error("locust-etcd: error: %s", error)
            return []
        return sla.judge(environment, self.recorder, gates) if gates else []

    def _stop_polling(self) -> None:
        if self.poller is not None:
            self.poller.stop()
            self.poller = None

    def _stop_compacting(self) -> None:
        if self.compactor is not None:
            self.compactor.stop()
            self.compactor = None

    @property
    def alarm(self) -> str | None:
        """etcd's NOSPACE alarm as the current (or last) run knows it, in one short line; None without one."""
        return self.space_watch.alarm if self.space_watch is not None else None

    def _fail(self, message: str) -> None:
        """End the process with one line: bad input is the user's to fix, not a traceback to read."""
        first_line = message.splitlines()[0] if message else "unknown error"
        sys.stderr.write(f"locust-etcd: error: {first_line}\n")
        sys.stderr.flush()
        bridge.close_bridge()
        self.target.stop_local()
        sys.exit(2)


def _interrupt_main_greenlet_on_ctrl_c(main) -> None:
    """Ctrl-C as Locust expects it: KeyboardInterrupt in its main greenlet, which shuts the run down cleanly.

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives; with busy users that is a user's
    greenlet, which dies with a traceback while the run ends without its summary.
    """

    def interrupt() -> None:
        if not main.dead:
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGINT, interrupt)
