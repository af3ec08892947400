"""The run's life cycle: Locust's events fanned out, in one place and in the order a run meets them, to the exact
latencies and to each feature's hooks (``etcd_users.core.features``), which reach each other through the run's context.

``install(events)`` is called once per process when the users are imported (``etcd_users.users``), before Locust
creates its runner. That order matters once: Locust fires ``quitting`` in reverse, so the master's own listener
(registered with its runner, after ours) tells the workers to quit and takes their last reports before the gates
are judged here. ``on_quitting`` makes sure of it even when installed later.
"""

from locust import log
from locust.event import Events

import importlib
import logging
import sys
import time

import gevent
import greenlet

from etcd_users import open_files
from etcd_users.core import collector, ctrl_c, exit_code
from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.features import add_option_groups, features
from etcd_users.core.master_port import check_master_port, command_line_before_the_runner
from etcd_users.core.run_context import attach, run_context
from etcd_users.core.user_classes import check_class_names
from etcd_users.features.key_space.hooks import KeySpaceFill
from etcd_users.features.latency import end_of_run, final_stats
from etcd_users.features.shapes.judged import check_on_init, judged_shape, judged_shapes
from etcd_users.features.target_cluster.checks import checked_settings
from etcd_users.features.target_cluster.cluster import TargetCluster, delete_prefix
from etcd_users.latency.client_cpu import ClientCpu
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.local import ClusterError
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError

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
    events.reset_stats.add_listener(lambda **_kwargs: plugin.recorder.on_reset_stats())
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
            for event in (
                "init",
                "test_start",
                "spawning_complete",
                "test_stop",
                "report_to_master",
                "worker_report",
                "quit",
            ):
                getattr(events, event).add_listener(getattr(hooks, f"on_{event}"))
            plugin.feature_hooks.append(hooks)
    if fill is not None:  # at init after the features' checks: bad input ends the process before a long fill
        events.init.add_listener(fill.on_init)
    return plugin


def installed(events: Events) -> "EtcdPlugin | None":
    """The plugin ``install`` wired into ``events``; None when the tool is not installed."""
    return getattr(events, _INSTALLED, None)


class EtcdPlugin:
    """The state of one process across runs (``etcd_users.core.feature_hooks.Tool``), and what each event does with it."""

    def __init__(self, etcd: bool) -> None:
        self.etcd = etcd
        self.environment = None
        self.recorder = LatencyRecorder()
        self.recorder.before_collect.append(self._flush_loop_results)
        self.client_cpu = ClientCpu()  # this process's CPU once a second, and on a master its workers'
        self.target = TargetCluster()
        # the master's (or single process's) settings of the current run; workers take theirs from their options
        self.run_settings: EtcdSettings | None = None
        self.ran = False  # a test started in this process, on a master or single process: there is a run to judge
        self.feature_hooks: list[FeatureHooks] = []  # the key space fill's, then FEATURES' own in their order
        self.shown_host: str | None = None  # the endpoints this process shows as Locust's host
        self.started_at = time.time()  # a file older than this is a previous run's
        self.open_files = -1  # this process's open-file limit, raised at init (-1: not yet)

    def add_options(self, parser, **_kwargs) -> None:
        add_option_groups(parser, self.etcd)
        if self.etcd:
            check_class_names(parser)  # a misspelt class: the nearest name and the list, exit 2, before Locust's own
        if command_line_before_the_runner():
            check_master_port(parser)

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        """Check the options and the cluster before anything runs; bad input ends the process with one line."""
        self.environment = self.recorder.environment = self.client_cpu.environment = environment
        context = attach(environment, runner)  # the process's role, decided here once
        ctrl_c.interrupt_main_greenlet_on_ctrl_c(greenlet.getcurrent())  # Locust fires init in its main greenlet
        self.open_files = open_files.raise_limit()  # every process: a worker's, a forked one's, the master's
        for shape in judged_shapes(environment):  # what a shape's live verdicts need from the run
            shape.recorder, shape.on_breach = self.recorder, lambda why: context.on_breach(why)
            shape.member_rows = lambda: context.member_rows
        if not self._has_etcd_options(environment) or context.role.is_worker:
            check_on_init(environment)  # a shape's own options, without the tool's etcd ones (not on workers)
            return  # workers take their options from the master when a run starts
        try:
            self.run_settings = checked_settings(environment, self.target, self.open_files)
        except (SettingsError, EndpointError, ClusterError) as error:
            self.fail(str(error))
        self._show_endpoints_as_host(environment, self.run_settings)

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
        try:  # the master resolves the endpoints before it sends the options to the workers
            options = environment.parsed_options
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
        else:
            self.run_settings = settings
            self._show_endpoints_as_host(environment, settings)
            for hooks in self.feature_hooks:  # before the key space is written: the monitoring watches the fill too
                hooks.on_run_start(environment, settings)
        context.drop_session_if_changed(settings)

    def on_spawning_complete(self, **_kwargs) -> None:
        self._flush_loop_results()  # before Locust's --reset-stats, which listens after this
        self.recorder.on_spawning_complete()
        collector.on_spawning_complete()

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        self._flush_loop_results()  # the report covers every request until now, the loop's batched ones too
        self.recorder.on_report_to_master(data)
        self.client_cpu.on_report_to_master(data)

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_worker_report(data, client_id)
        self.client_cpu.on_worker_report(client_id, data)

    def on_test_stop(self, environment, **_kwargs) -> None:
        self._flush_loop_results()  # the users have stopped: their last results, before anything reads the figures
        self.recorder.on_test_stop()
        collector.on_test_stop()

    def on_quitting(self, environment, **_kwargs) -> None:
        """Judge the run on the final figures, then decide the exit code (Locust's rule runs right after this event,
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
        self.recorder.on_quitting()
        for hooks in self.feature_hooks:  # the gates' first: they judge on what the later features still hold
            hooks.on_quitting(environment)
        if role.judges:
            final_stats.at_quitting(environment)  # with --json(-file): before Locust clears its per-name figures
            self._decide_exit_code(environment, shape)

    def _decide_exit_code(self, environment, shape) -> None:
        """Once, from every verdict: the features' (the gates', the audit's), the shape's and Locust's own on the
        requests. Workers keep Locust's rule: they judge nothing."""
        verdicts = [hooks.exit_verdict(environment) for hooks in self.feature_hooks]
        verdicts.append(shape.exit_verdict() if shape is not None else None)
        verdicts.append(exit_code.locust_verdict(environment, log.unhandled_greenlet_exception))
        decided = exit_code.decide(verdicts)
        environment.process_exit_code = decided.code
        if decided.code:
            logger.info("exit code %d: %s", decided.code, decided.reason)

    def on_quit(self, **_kwargs) -> None:
        # on quit, not quitting: Locust fires quitting before it stops users, whose calls would then fail
        self.recorder.on_quit()  # the exact files, whole: the workers' last reports are in
        self.client_cpu.on_quit()
        for hooks in self.feature_hooks:  # while the local etcd still runs, before the files are listed
            hooks.on_run_files()
        if self.environment is not None and run_context(self.environment).role.judges:
            junit_path = (self.run_settings.gates.junit or None) if self.run_settings is not None else None
            end_of_run.at_quit(self.environment, self.recorder, junit_path, since=self.started_at)
        for hooks in self.feature_hooks:  # after Locust's summary tables and the files, where a pipeline's log ends
            hooks.on_run_files_listed()
        if not self.etcd:
            return
        if self.environment is not None:
            run_context(self.environment).close_session()
        if self.run_settings is not None and self.run_settings.cleanup:
            try:
                delete_prefix(self.run_settings)
            except (EndpointError, SettingsError) as error:
                logger.error("locust-etcd: could not delete the keys under the prefix: %s", error)
        bridge.close_bridge()
        self.target.stop_local()

    def _show_endpoints_as_host(self, environment, settings: EtcdSettings) -> None:
        """Locust's header shows the host: the endpoints the run loads, unless a host of one's own was given."""
        host = ",".join(endpoint.url for endpoint in settings.endpoints)
        if not environment.host or environment.host == self.shown_host:
            environment.host = self.shown_host = host

    def _flush_loop_results(self) -> None:
        if self.etcd and self.environment is not None:
            run_context(self.environment).flush_loop_results()

    def _has_etcd_options(self, environment) -> bool:
        return self.etcd and hasattr(environment.parsed_options, "etcd_endpoints")

    def fail(self, message: str, code: int = exit_code.BAD_INPUT) -> None:
        """End the process with one line: bad input is the user's to fix, not a traceback to read (exit code 2;
        130 for a Ctrl-C before the run)."""
        first_line = message.splitlines()[0] if message else "unknown error"
        sys.stderr.write(f"locust-etcd: error: {first_line}\n")
        sys.stderr.flush()
        bridge.close_bridge()
        self.target.stop_local()
        sys.exit(code)
