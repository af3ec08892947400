"""A run whose measured window holds no request ends with one line saying why, and exit code 1: an empty table with
exit code 0 reads as a run that passed. Watchers that received events of another run's writes measured those.

``EmptyRun`` is a feature's hooks, after every other's: judged at ``quitting`` on the master or the single process,
once the workers' last reports are in and the other features have judged (the watchers' tally), its ``exit_verdict``
taken into the exit code (``etcd_users.core.exit_code``); the line is printed at ``quit``, after Locust's summary and
the other features' lines, where a pipeline's log ends. ``why_empty`` is pure.
"""

import logging
import time
from collections.abc import Iterable

from etcd_users.core.exit_code import NOTHING_MEASURED, ExitVerdict
from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.run_state.watchers import WatchTallies
from etcd_users.workload_model.preparation import KEY_SPACE, Preparation

_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary


def why_empty(
    preparations: Iterable[Preparation],
    run_seconds: float,
    run_time: float | None,
    target_users: int,
    running_users: int,
) -> str:
    """The one line of a run that measured no request: its cause as far as the run knows it."""
    prefix = "locust-etcd: no request was measured: "
    preparations = list(preparations)
    for preparation in preparations:
        if preparation.failed:
            stopped = ", and the users that read it stopped" if preparation.what == KEY_SPACE else ""
            return (
                f"{prefix}{preparation.shown} stopped after {preparation.written:,} of {preparation.keys:,} keys "
                f"({preparation.error}){stopped}"
            )
    for preparation in preparations:
        if preparation.inside_run and run_time and preparation.seconds >= run_time:
            size = "--etcd-key-space-size" if preparation.what == KEY_SPACE else "--etcd-k8s-objects"
            return (
                f"{prefix}{preparation.shown} took the whole run ({preparation.seconds:.0f} s of a run time of "
                f"{run_time:g} s); give a longer run time or a smaller {size}"
            )
    if target_users <= 0:
        return f"{prefix}no user was started (a user count of 0)"
    if running_users <= 0:
        return f"{prefix}every user stopped before its first request (see the errors above)"
    return (
        f"{prefix}{running_users} user{'s' * (running_users != 1)} ran for {run_seconds:.0f} s and none of their "
        "requests ended, neither answered nor failed"
    )


class EmptyRun(FeatureHooks):
    """The judgement of the current run, and its line until it is printed."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.line = ""

    def on_quitting(self, environment) -> None:
        """A run without a request gets its line."""
        self.line = ""
        runner = environment.runner
        if not self.tool.ran or self.tool.run_settings is None or runner is None:
            return
        context = run_context(environment)
        if context.role.is_worker or environment.stats.total.num_requests:
            return
        tally = context.get(WatchTallies).final  # judged by the watchers' hooks at quitting, before this
        if tally is not None and tally.events:
            return  # watchers of another run's writes: their events are the measure (the ``watchers:`` line)
        options = environment.parsed_options
        self.line = why_empty(
            (hooks.preparation for hooks in self.tool.feature_hooks if hooks.preparation is not None),
            time.time() - environment.stats.start_time,
            getattr(options, "run_time", None),
            getattr(runner, "target_user_count", 0) or 0,
            runner.user_count,
        )

    def exit_verdict(self, environment) -> ExitVerdict | None:
        """The run's part in the exit code: 1 when it measured no request."""
        return ExitVerdict(NOTHING_MEASURED, "no request was measured") if self.line else None

    def on_quit(self, **_kwargs) -> None:
        if self.line:
            _console.info("%s", self.line)
