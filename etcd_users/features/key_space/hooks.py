"""When the read key space is written: a headless run's at init, before Locust starts the clock of -t; a run started
from the web UI at its start. ``KeySpaceFill`` is the hooks ``plugin.install`` wires
(``etcd_users.key_space_fill`` writes the keys).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import signal

import gevent

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.key_space_fill import fill_key_space, forget_fills, reads_key_space

INTERRUPTED_EXIT_CODE = 130  # a shell's for a process that Ctrl-C ended


class KeySpaceFill(FeatureHooks):
    """Fills the key space of the run's reading classes on the master or the single process: at init once every
    feature's checks passed, or at a run's start before the other features' own ``test_start``."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.filled_at_init = False

    def on_init_checked(self, environment) -> None:
        """A headless run knows its classes and options now, before Locust starts the clock of -t (and after every
        feature's checks: bad input ends the process before a long fill)."""
        options = environment.parsed_options
        if getattr(options, "headless", False) or getattr(options, "autostart", False):
            try:
                self.filled_at_init = self._fill(environment, inside_run=False)
            except KeyboardInterrupt:  # Ctrl-C before the run: one line, the local etcd stopped
                gevent.signal_handler(signal.SIGINT, lambda: None)  # a second Ctrl-C does not cut the clean-up short
                self.tool.fail("interrupted while the key space was being written", code=INTERRUPTED_EXIT_CODE)

    def on_test_start(self, environment, **_kwargs) -> None:
        if self.filled_at_init:
            self.filled_at_init = False  # this first run's key space was written at init
            return
        self.preparation = None
        self._fill(environment, inside_run=True)  # the web UI's runs: classes and options come with the start

    def _fill(self, environment, *, inside_run: bool) -> bool:
        if run_context(environment).role.is_worker or not reads_key_space(environment.user_classes):
            return False
        settings = self.tool.run_settings
        if settings is None:
            return False  # the options were refused: the run is being stopped
        forget_fills()  # a new run: the key space may have changed since (a cleanup, another run's deletes)
        self.preparation = fill_key_space(settings, inside_run=inside_run)
        return True
