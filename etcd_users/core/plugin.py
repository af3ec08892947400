"""The run's life cycle: Locust's events fanned out, in the order a run meets them, to each feature's hooks
(``etcd_users.core.features``), which reach each other through the run's context; and the exit code, decided once.
``install(events)`` runs when the users are imported; the hooks are made when Locust builds its parser."""

from locust import log
from locust.event import EventHook, Events

import logging
import sys
import time

import greenlet

from etcd_users.core import collector, ctrl_c, exit_code
from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.core.features import FEATURES, add_option_groups, features, hook_order, named
from etcd_users.core.master_port import check_master_port, command_line_before_the_runner
from etcd_users.core.run_context import attach, run_context
from etcd_users.core.slots import Slots
from etcd_users.core.user_classes import check_class_names

_INSTALLED = "etcd_users_plugin"
EVENTS = ("init", "test_start", "spawning_complete", "test_stop", "report_to_master", "worker_report", "quit")


def install(events: Events, *, etcd: bool = True, names: tuple[str, ...] = FEATURES) -> "EtcdPlugin":
    """Wire the tool into ``events`` once; ``etcd=False``: a locustfile whose users are not etcd's (no ``--etcd-*``)."""
    if getattr(events, _INSTALLED, None) is not None:
        return getattr(events, _INSTALLED)
    plugin = EtcdPlugin(events, etcd, names)
    setattr(events, _INSTALLED, plugin)
    events.init_command_line_parser.add_listener(plugin.add_options)
    events.init.add_listener(plugin.on_init)
    for event in ("test_start", "spawning_complete", "test_stop"):
        getattr(events, event).add_listener(getattr(collector, f"on_{event}"))
    events.quitting.add_listener(plugin.on_quitting)
    events.quit.add_listener(plugin.on_quit)
    # the features' hooks listen here, before a locustfile's own listeners, though they are made later
    for event, hook in plugin.hook_events.items():
        getattr(events, event).add_listener(hook.fire)
    events.init.add_listener(plugin.on_init_checked)
    return plugin


class EtcdPlugin(Slots):
    """The state of one process across runs (``etcd_users.core.feature_hooks.Tool``), and what each event does."""

    def __init__(self, events: Events, etcd: bool, names: tuple[str, ...]) -> None:
        super().__init__()
        self.events, self.etcd, self.names = events, etcd, names
        self.environment, self.run_settings = None, None  # the settings: a master's (or single process's) run's
        self.ran = False  # a test started in this process, on a master or single process: there is a run to judge
        self.feature_hooks: list[FeatureHooks] = []  # every feature's, in their order, made with the parser
        self.hook_events = {event: EventHook() for event in EVENTS}  # each event's features' hooks, in their order
        self.started_at = time.time()  # a file older than this is a previous run's

    def add_options(self, parser, **_kwargs) -> None:
        add_option_groups(parser, self.etcd)
        if self.etcd:
            check_class_names(parser)  # a misspelt class: the nearest name and the list, exit 2, before Locust's own
        if command_line_before_the_runner():
            check_master_port(parser)
        self.make_hooks()

    def make_hooks(self) -> None:
        """Each feature's hooks, once, listening after the plugin's own listeners (and each other's in their declared
        order: ``etcd_users.core.features.hook_order``)."""
        if self.feature_hooks:
            return
        for feature in (feature for feature in hook_order(features(self.etcd, self.names)) if feature.hooks):
            hooks: FeatureHooks = named(feature, feature.hooks)(self)
            for event, hook in self.hook_events.items():
                hook.add_listener(getattr(hooks, f"on_{event}"))
            self.feature_hooks.append(hooks)

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        self.environment = environment
        attach(environment, runner)  # the process's role, decided here once
        ctrl_c.interrupt_main_greenlet_on_ctrl_c(greenlet.getcurrent())  # Locust fires init in its main greenlet
        self.make_hooks()  # an environment made without Locust's parser (a test's): in time for this init too

    def each(self, method: str, *args, reverse: bool = False) -> None:
        """Every feature's ``method`` (a ``FeatureHooks`` one the plugin calls itself), in their order."""
        for hooks in reversed(self.feature_hooks) if reverse else self.feature_hooks:
            getattr(hooks, method)(*args)

    def on_init_checked(self, environment, **_kwargs) -> None:  # once every feature's on_init passed
        self.each("on_init_checked", environment)

    def start_run(self, environment, settings) -> None:
        self.each("on_run_start", environment, settings)

    def on_quitting(self, environment, **_kwargs) -> None:
        """Judge the run on the final figures, then decide the exit code (Locust's rule takes the code set here)."""
        collector.on_test_stop()  # a process that quits without stopping its run: objects are looked up next
        role = run_context(environment).role
        if role.is_master and len(environment.runner.greenlet):
            # the workers' last reports first: Locust fires quitting in reverse, its own listener would quit them after
            environment.runner.quit()
        self.each("on_quitting", environment)  # the gates' first: they judge on what the later features still hold
        if role.judges:  # once, from every verdict: the features' and Locust's own on the requests
            verdicts = [hooks.exit_verdict(environment) for hooks in self.feature_hooks]
            verdicts.append(exit_code.locust_verdict(environment, log.unhandled_greenlet_exception))
            decided = exit_code.decide(verdicts)
            environment.process_exit_code = decided.code
            if decided.code:
                logging.getLogger(RUN_LOGGER).info("exit code %d: %s", decided.code, decided.reason)

    def on_quit(self, **_kwargs) -> None:
        # on quit, not quitting: Locust fires quitting before it stops users, whose calls would then fail
        self.each("on_run_files")  # while the local etcd still runs, before the files are listed
        self.each("on_run_files_listed")  # after Locust's summary tables and the files, where a pipeline's log ends
        self.each("on_cleanup", False, reverse=True)

    def fail(self, message: str, code: int = exit_code.BAD_INPUT) -> None:
        """End the process with one line, not a traceback (bad input: exit code 2; a Ctrl-C before the run: 130)."""
        first_line = message.splitlines()[0] if message else "unknown error"
        sys.stderr.write(f"locust-etcd: error: {first_line}\n")
        sys.stderr.flush()
        self.each("on_cleanup", True, reverse=True)
        sys.exit(code)
