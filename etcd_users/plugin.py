"""The run's life cycle: every Locust event the tool handles, wired in one place, in the order a run meets them.

``install(events)`` is called once per process when the users are imported (``etcd_users.users``), before Locust
creates its runner. That order matters once: Locust fires ``quitting`` in reverse, so the master's own listener
(registered with its runner, after ours) tells the workers to quit and takes their last reports before the gates
are judged here. ``on_quitting`` makes sure of it even when installed later.
"""

from locust import log
from locust.event import Events

import importlib
import logging
import signal
import sys
import time

import gevent
import greenlet

from etcd_users import collector, exit_code, open_files
from etcd_users.features import FeatureHooks, add_option_groups, features
from etcd_users.key_space_run import KeySpaceFill
from etcd_users.latency.client_cpu import ClientCpu
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.local import ClusterError
from etcd_users.reporting import (
    breach,
    end_of_run,
    exporter,
    final_stats,
    junit,
    preflight,
    space,
    webui,
)
from etcd_users.reporting.empty_run import EmptyRun
from etcd_users.reporting.rate_shortfall import RateShortfall
from etcd_users.reporting.verdicts import GateVerdicts
from etcd_users.run_context import RunContext, attach, run_context
from etcd_users.run_monitoring import RunMonitoring
from etcd_users.settings import EtcdSettings, GateSettings, SettingsError, settings_from_options
from etcd_users.shapes.protocol import check_on_init, judged_shape, judged_shapes
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
    fill = KeySpaceFill(plugin) if etcd else None
    if fill is not None:  # the key space is written before the features' test_start (the key skew's first read)
        events.test_start.add_listener(fill.on_test_start)
        plugin.feature_hooks.append(fill)
    for feature in features(etcd):  # after the plugin's own: the run's settings and the local etcd come first
        if feature.hooks:
            module, _, name = feature.hooks.partition(":")
            hooks: FeatureHooks = getattr(importlib.import_module(module), name)(plugin)
            events.init.add_listener(hooks.on_init)
            events.test_start.add_listener(hooks.on_test_start)
            events.test_stop.add_listener(hooks.on_test_stop)
            events.report_to_master.add_listener(hooks.on_report_to_master)
            events.worker_report.add_listener(hooks.on_worker_report)
            events.quit.add_listener(hooks.on_quit)
            plugin.feature_hooks.append(hooks)
    if fill is not None:  # at init after the features' checks: bad input ends the process before a long fill
        events.init.add_listener(fill.on_init)
    events.quit.add_listener(plugin.empty_run.on_quit)  # after everyone's: the last lines of the run
    events.quit.add_listener(plugin.rate_shortfall.on_quit)
    return plugin


def installed(events: Events) -> "EtcdPlugin | None":
    """The plugin ``install`` wired into ``events``; None when the tool is not installed."""
    return getattr(events, _INSTALLED, None)


class EtcdPlugin:
    """The state of one process across runs, and what each event does with it."""

    def __init__(self, etcd: bool) -> None:
        self.etcd = etcd
        self.environment = None
        self.recorder = LatencyRecorder()
        self.client_cpu = ClientCpu()  # this process's CPU once a second, and on a master its workers'
        self.target = TargetCluster()
        # the master's (or single process's) settings of the current run; workers take theirs from their options
        self.run_settings: EtcdSettings | None = None
        self.context: RunContext | None = None  # this process's state for its runs, made at init
        self.space_watch: space.SpaceWatch | None = None  # the current (or last) run's db against quota and alarms
        self.ran = False  # a test started in this process, on a master or single process: there is a run to judge
        self.feature_hooks: list[FeatureHooks] = []  # the key space fill's, then FEATURES' own in their order
        self.verdicts = GateVerdicts()  # the gates: judged at quitting, written and printed at quit
        self.empty_run = EmptyRun()  # a run that measured no request: judged at quitting, its line printed at quit
        self.rate_shortfall = RateShortfall(self.recorder, self.client_cpu)  # --etcd-user-rate not held: a line at quit
        self.tabs: webui.EtcdTabs | None = None  # the web UI's etcd tabs, on a master or single process with one
        self.exporter: exporter.Exporter | None = None  # --etcd-prometheus-port, on a master or single process
        self.shown_host: str | None = None  # the endpoints this process shows as Locust's host
        self.started_at = time.time()  # a file older than this is a previous run's
        self.open_files = -1  # this process's open-file limit, raised at init (-1: not yet)
        self.breach_capture: breach.Capture | None = None  # the members at a run's first breach
        self.preflight: list[preflight.MemberReport] = []  # the members as found at start-up
        # the current (or last) run's rows of the members' /metrics, kept past the run's stop for the gates and the
        # summary; None when the run polled none (--etcd-metrics-interval 0)
        self.member_rows: list[dict] | None = None

    # -- start-up --

    def add_options(self, parser, **_kwargs) -> None:
        add_option_groups(parser, self.etcd)
        if self.etcd:
            check_class_names(parser)  # a misspelt class: the nearest name and the list, exit 2, before Locust's own

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        """Check the options and the cluster before anything runs; bad input ends the process with one line."""
        self.environment = environment
        context = self.context = attach(environment, runner)  # the process's role, decided here once
        self.recorder.environment = environment
        self.client_cpu.environment = environment
        _interrupt_main_greenlet_on_ctrl_c(greenlet.getcurrent())  # Locust fires init in its main greenlet
        self.open_files = open_files.raise_limit()  # every process: a worker's, a forked one's, the master's
        for shape in judged_shapes(environment):  # what a shape's live verdicts need from the tool
            shape.recorder, shape.on_breach = self.recorder, self.on_breach
            shape.member_rows = lambda: self.member_rows
        if not self._has_etcd_options(environment) or context.role.is_worker:
            check_on_init(environment)  # a shape's own options, without the tool's etcd ones (not on workers)
            return  # workers take their options from the master when a run starts
        options = environment.parsed_options
        available = environment.available_user_classes or {}
        if no_class_named(options.user_classes, available, options.headless or options.autostart):
            self.fail(no_class_message(available, environment.parsed_locustfiles or ()))
        # a load shape's options (shapes.protocol.JudgedShape), before a local etcd starts for a run that cannot be
        shape = judged_shape(environment)
        if shape is not None and not options.class_picker:
            error = shape.options_error(options)
            if error:
                self.fail(error)
        try:
            junit_path = GateSettings.read_one(options, "junit")
            if junit_path:
                junit.check_path(junit_path)  # now, not after the run, and before a local etcd starts
            settings = self.target.settings(environment.parsed_options)
            too_many = open_files.connections_error(settings.conns, len(settings.endpoints), self.open_files)
            if too_many:
                self.fail(too_many)
            # a workload that needs an option the run lacks; the class picker offers every class, to be picked later
            for user_class in environment.user_classes if not options.class_picker else ():
                lacking = getattr(user_class, "options_error", None)
                if lacking is not None and lacking(settings):
                    self.fail(lacking(settings))
            check_prefix_free(settings)
        except (SettingsError, EndpointError, ClusterError) as error:
            self.fail(str(error))
        self.run_settings = settings
        self._show_endpoints_as_host(environment, settings)
        # informs only (versions, db size against quota, fsync P99 under a short burst); never stops the run
        try:
            is_master = context.role.is_master
            self.exporter = exporter.start(environment, web_ui, self.recorder, lambda: self.run_settings, is_master)
        except exporter.ExporterError as error:
            self.fail(str(error))
        self.preflight = preflight.report(settings, with_probe)
        if web_ui is not None:
            self.tabs = webui.install(
                environment,
                web_ui,
                self.recorder,
                lambda: self.run_settings,
                lambda: self.alarm,
                lambda: context.disruption_windows(),
            )

    # -- a run --

    def on_test_start(self, environment, **_kwargs) -> None:
        """A new run may come with new options (the web UI's form, or the master's): reconnect with them."""
        self.recorder.on_test_start()
        self.client_cpu.on_test_start()
        collector.on_test_start()
        if not self._has_etcd_options(environment):
            return
        context = run_context(environment)
        is_worker = context.role.is_worker
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
        if is_worker:  # the master checked its own limit; a worker on another machine may have a lower one
            too_many = open_files.connections_error(settings.conns, len(settings.endpoints), self.open_files)
            if too_many:
                logger.error("locust-etcd: error: %s", too_many)
        if not is_worker:
            self.run_settings = settings
            self._show_endpoints_as_host(environment, settings)
            if self.tabs is not None:
                self.tabs.on_test_start()
            self._stop_run()
            self.rate_shortfall.on_test_start(environment, settings.user_rate)
            local = self.target.local
            run = context.monitoring = RunMonitoring.start(
                environment, settings, local.compaction if local is not None else None
            )
            self.space_watch = run.space_watch
            self.member_rows = run.poller.rows if run.poller is not None else None
            if settings.monitoring.profile_on_breach > 0 and not options.csv_prefix:
                logger.warning("--etcd-profile-on-breach: nothing is captured without --csv PREFIX (PREFIX_breach/)")
        context.drop_session_if_changed(settings)

    def on_breach(self, why: str) -> None:
        """A gate failed during the run (the live judging calls this): the members' side, once per run.

        Returns at once; with ``--etcd-profile-on-breach`` and ``--csv`` the capture runs in its own greenlet.
        Only the master or the single process captures: workers see none of the members' side.
        """
        run = self.context.monitoring if self.context is not None else None
        if run is None or self.environment is None:
            return  # no run of a master or single process: workers see none of the members' side
        busy = self.breach_capture is not None and self.breach_capture.running()  # a previous run's, same directory
        capture = run.capture_breach(why, self.environment.parsed_options.csv_prefix, busy)
        if capture is not None:
            self.breach_capture = capture

    def on_spawning_complete(self, **_kwargs) -> None:
        self.recorder.on_spawning_complete()
        collector.on_spawning_complete()
        if self.environment is not None:
            self.rate_shortfall.on_spawning_complete(self.environment)

    def on_reset_stats(self, **_kwargs) -> None:
        self.recorder.on_reset_stats()

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_report_to_master(data)
        self.client_cpu.on_report_to_master(data)

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_worker_report(data, client_id)
        self.client_cpu.on_worker_report(client_id, data)

    def on_test_stop(self, environment, **_kwargs) -> None:
        self._stop_run()
        self.rate_shortfall.on_test_stop()
        self.recorder.on_test_stop()
        collector.on_test_stop()

    # -- the end --

    def on_quitting(self, environment, **_kwargs) -> None:
        """Judge the gates on the final figures, then decide the exit code (Locust's rule runs right after this event,
        and takes the code set here)."""
        collector.on_test_stop()  # a process that quits without stopping its run: objects are looked up next
        runner = environment.runner
        role = run_context(environment).role
        if role.is_master and len(runner.greenlet):
            runner.quit()  # the workers' last reports first (Locust's own listener would do it after this one)
        # a shape judging its levels live (shapes.base.PlannedShape) judges those still waiting, on the final figures
        shape = judged_shape(environment)
        if shape is not None and role.judges:
            shape.judge_remaining_levels()
        if self.ran and self._judges(environment):
            context = run_context(environment)
            windows = context.final_disruption_windows()
            staleness = context.final_staleness()
            self.verdicts.judge(
                environment, self.recorder, self.run_settings, shape, windows, self.member_rows or [], staleness
            )
        self.recorder.on_quitting()
        for hooks in self.feature_hooks:  # the workers' last reports are in
            hooks.on_quitting(environment)
        if self.ran and self._judges(environment):
            self.empty_run.judge(environment, self.feature_hooks)
        if role.judges:
            final_stats.at_quitting(environment)  # with --json(-file): before Locust clears its per-name figures
            self._decide_exit_code(environment, shape)

    def _decide_exit_code(self, environment, shape) -> None:
        """Once, from every verdict: the gates', the shape's, the features' and Locust's own on the requests. Workers
        keep Locust's rule: they judge nothing."""
        verdicts = [self.verdicts.exit_verdict(), shape.exit_verdict() if shape is not None else None]
        verdicts += [hooks.exit_verdict(environment) for hooks in self.feature_hooks]
        verdicts.append(self.empty_run.exit_verdict())
        verdicts.append(exit_code.locust_verdict(environment, log.unhandled_greenlet_exception))
        decided = exit_code.decide(verdicts)
        environment.process_exit_code = decided.code
        if decided.code:
            logger.info("exit code %d: %s", decided.code, decided.reason)

    def on_quit(self, **_kwargs) -> None:
        # on quit, not quitting: Locust fires quitting before it stops users, whose calls would then fail
        self.recorder.on_quit()  # the exact files, whole: the workers' last reports are in
        self.client_cpu.on_quit()
        self._finish_breach_capture()  # while the local etcd still runs, and before the files are listed
        if self._judges(self.environment):
            try:  # before the files are listed: the JUnit report is one of them
                shape = judged_shape(self.environment)
                self.verdicts.write_reports(self.environment, self.recorder, self.run_settings, shape, self.ran)
            except Exception:  # a report never stops the clean-up below
                logger.exception("locust-etcd: could not write the JUnit report or the step summary")
        for hooks in self.feature_hooks:
            hooks.on_run_files()
        self._end_of_run()
        self.verdicts.print()  # after Locust's summary tables, where a pipeline's log ends
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None
        self._stop_run()  # before the clean-up and the local etcd's end
        if not self.etcd:
            return
        if self.context is not None:
            self.context.close_session()
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
        if environment is None or run_context(environment).role.is_worker:
            return
        final_stats.at_quit(environment)
        options = environment.parsed_options
        json_file = getattr(options, "json_file", None)
        prefix = getattr(options, "csv_prefix", None)
        reports = (getattr(options, "html_file", None), f"{json_file}.json" if json_file else None)
        reports += (breach.capture_file(prefix) if prefix else None,)  # its directory holds the members' files
        reports += ((self.run_settings.gates.junit or None) if self.run_settings is not None else None,)
        paths = end_of_run.run_files(prefix, reports, since=self.started_at)
        end_of_run.print_summary(self.recorder.snapshot(), paths)

    # -- helpers --

    def _show_endpoints_as_host(self, environment, settings: EtcdSettings) -> None:
        """Locust's header shows the host: the endpoints the run loads, unless a host of one's own was given."""
        host = ",".join(endpoint.url for endpoint in settings.endpoints)
        if not environment.host or environment.host == self.shown_host:
            environment.host = self.shown_host = host

    def _has_etcd_options(self, environment) -> bool:
        return self.etcd and hasattr(environment.parsed_options, "etcd_endpoints")

    def _judges(self, environment) -> bool:
        """A master or single process of an etcd run judges its gates; workers see a part of the load."""
        return (
            environment is not None
            and self._has_etcd_options(environment)
            and run_context(environment).role.judges
            and self.run_settings is not None
        )

    def _stop_run(self) -> None:
        run = self.context.monitoring if self.context is not None else None
        if run is not None:
            run.stop()
            self.context.monitoring = None

    def _finish_breach_capture(self) -> None:
        capture = self.breach_capture
        if capture is None or not capture.running():
            return
        logger.info("breach capture: waiting up to %.0fs for the members' profiles", capture.deadline)
        if not capture.wait(capture.deadline + 1.0):
            logger.warning("breach capture: unfinished at exit; see %s", capture.directory)

    @property
    def alarm(self) -> str | None:
        """etcd's NOSPACE alarm as the current (or last) run knows it, in one short line; None without one."""
        return self.space_watch.alarm if self.space_watch is not None else None

    def fail(self, message: str, code: int = exit_code.BAD_INPUT) -> None:
        """End the process with one line: bad input is the user's to fix, not a traceback to read (exit code 2;
        130 for a Ctrl-C before the run)."""
        first_line = message.splitlines()[0] if message else "unknown error"
        sys.stderr.write(f"locust-etcd: error: {first_line}\n")
        sys.stderr.flush()
        bridge.close_bridge()
        self.target.stop_local()
        sys.exit(code)


def _interrupt_main_greenlet_on_ctrl_c(main) -> None:
    """Ctrl-C as Locust expects it: KeyboardInterrupt in its main greenlet, which shuts the run down cleanly.

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives; with busy users that is a user's
    greenlet, which dies with a traceback while the run ends without its summary.
    """

    def interrupt() -> None:
        if not main.dead:
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGINT, interrupt)
