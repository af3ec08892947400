"""The monitoring of the members, a feature's hooks (``etcd_users.core.features``): the pre-flight report at start-up,
then on a master or single process each run's ``RunMonitoring`` (the members' /metrics, the db against its quota, the
compaction) and the members' side at the run's first breach (``--etcd-profile-on-breach``, with ``--csv``).

What the other features read of it goes on the run's context: the members as found at start-up, the polled rows (the
gates, the summary, a shape's live verdicts), the space watch (the web UI's alarm) and ``on_breach``.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging

from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.core.run_context import RunContext, run_context
from etcd_users.features.monitoring import breach
from etcd_users.features.monitoring.during_run import RunMonitoring
from etcd_users.members import preflight
from etcd_users.members.seen import MembersSeen
from etcd_users.settings import EtcdSettings
from etcd_users.target.cluster import TargetCluster
from etcd_users.transport.probe import with_probe

logger = logging.getLogger(RUN_LOGGER)


class MembersWatch(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.environment = None
        self.context: RunContext | None = None
        self.capture: breach.Capture | None = None  # the members at a run's first breach

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        self.environment = environment
        self.context = run_context(environment)
        seen = self.context.get(MembersSeen)
        seen.on_breach = self.on_breach
        if self.tool.run_settings is not None:  # a master or single process with the run's settings
            # informs only (versions, db size against quota, fsync P99 under a short burst); never stops the run
            seen.preflight = preflight.report(self.tool.run_settings, with_probe)

    def on_run_start(self, environment, settings: EtcdSettings) -> None:
        self._stop_run()
        local = self.tool.get(TargetCluster).local
        seen = self.context.get(MembersSeen)
        run = seen.monitoring = RunMonitoring.start(
            environment,
            settings,
            local.compaction if local is not None else None,
            (lambda: list(zip(local.endpoints, local.metrics_urls, strict=True))) if local is not None else None,
        )
        seen.space_watch = run.space_watch
        seen.member_rows = run.poller.rows if run.poller is not None else None
        if settings.monitoring.profile_on_breach > 0 and not environment.parsed_options.csv_prefix:
            logger.warning("--etcd-profile-on-breach: nothing is captured without --csv PREFIX (PREFIX_breach/)")

    def on_breach(self, why: str) -> None:
        """A gate failed during the run (the live judging calls this): the members' side, once per run.

        Returns at once; with ``--etcd-profile-on-breach`` and ``--csv`` the capture runs in its own greenlet.
        Only the master or the single process captures: workers see none of the members' side.
        """
        run = self.context.get(MembersSeen).monitoring if self.context is not None else None
        if run is None or self.environment is None:
            return  # no run of a master or single process: workers see none of the members' side
        busy = self.capture is not None and self.capture.running()  # a previous run's, same directory
        capture = run.capture_breach(why, self.environment.parsed_options.csv_prefix, busy)
        if capture is not None:
            self.capture = capture

    def on_test_stop(self, environment, **_kwargs) -> None:
        self._stop_run()

    def on_run_files(self) -> None:
        # while the local etcd still runs, and before the files are listed: the capture's and the rows' last
        self._finish_capture()
        self._stop_run()

    def _stop_run(self) -> None:
        seen = self.context.get(MembersSeen) if self.context is not None else None
        if seen is not None and seen.monitoring is not None:
            seen.monitoring.stop()
            seen.monitoring = None

    def _finish_capture(self) -> None:
        capture = self.capture
        if capture is None or not capture.running():
            return
        logger.info("breach capture: waiting up to %.0fs for the members' profiles", capture.deadline)
        if not capture.wait(capture.deadline + 1.0):
            logger.warning("breach capture: unfinished at exit; see %s", capture.directory)
