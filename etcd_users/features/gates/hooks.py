"""The gates, a feature's hooks (``etcd_users.core.features``): judged at quitting on the final figures, first among the
features (the disruptions' windows and the audit's staleness are still theirs to give), with the watch over the
workers (a run that lost some fails among them); written for CI before the run's files are listed, printed right
after them, where a pipeline's log ends. Only a master or a single process judges: workers see a part of the load.

The results go on the run's context (``gate_results``) for the run's summary; the exit code takes ``exit_verdict``.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging

from etcd_users.audit_trail.record import AuditState
from etcd_users.core.exit_code import ExitVerdict
from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.gates.verdicts import GateVerdicts
from etcd_users.features.gates.worker_watch import WorkerWatch
from etcd_users.judging.judged import judged_shape
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.disruption_windows import DisruptionWindows
from etcd_users.run_state.gate_state import GateState

logger = logging.getLogger(RUN_LOGGER)


class GatesRun(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.environment = None
        self.verdicts = GateVerdicts()
        self.workers = WorkerWatch(tool)

    def on_init(self, environment, runner=None, web_ui=None, **kwargs) -> None:
        self.environment = environment
        self.workers.on_init(environment, runner, web_ui, **kwargs)

    def on_test_start(self, environment, **kwargs) -> None:
        self.workers.on_test_start(environment, **kwargs)

    def on_test_stop(self, environment, **kwargs) -> None:
        self.workers.on_test_stop(environment, **kwargs)

    def on_quitting(self, environment) -> None:
        self.workers.on_quitting(environment)
        if not self.tool.ran or not self._judges(environment):
            return
        context = run_context(environment)
        windows = context.get(DisruptionWindows).final()
        staleness = context.get(AuditState).final_staleness()
        settings, shape = self.tool.run_settings, judged_shape(environment)
        self.verdicts.judge(
            environment,
            self.tool.get(LatencyRecorder),
            settings,
            shape,
            windows,
            context.get(MembersSeen).member_rows or [],
            staleness,
        )
        self.workers.add_verdict(self.verdicts.results)
        context.get(GateState).results = self.verdicts.results

    def exit_verdict(self, environment) -> ExitVerdict | None:
        return self.verdicts.exit_verdict()

    def on_run_files(self) -> None:
        if not self._judges(self.environment):
            return
        try:  # before the files are listed: the JUnit report is one of them
            shape = judged_shape(self.environment)
            self.verdicts.write_reports(
                self.environment, self.tool.get(LatencyRecorder), self.tool.run_settings, shape, self.tool.ran
            )
        except Exception:  # a report never stops the clean-up after it
            logger.exception("locust-etcd: could not write the JUnit report or the step summary")

    def on_run_files_listed(self) -> None:
        self.verdicts.print()

    def on_quit(self, **kwargs) -> None:
        self.workers.on_quit(**kwargs)

    def _judges(self, environment) -> bool:
        """A master or single process of an etcd run judges its gates; workers see a part of the load."""
        return environment is not None and self.tool.run_settings is not None and run_context(environment).role.judges
