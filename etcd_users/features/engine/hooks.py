"""The engine's hooks: the line at each run's start that says which way each User class sends its requests, and the
loop thread's batched results applied before anything reads the run's figures (the recorder's collection, Locust's
--reset-stats at spawning's end, a worker's report, the test's stop)."""

import logging

from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.engine.choice import engine_line, runs_on_loop
from etcd_users.features.engine.locust_adapter import batch_logging_missing
from etcd_users.features.engine.results import flush_loop_results
from etcd_users.latency.recorder import LatencyRecorder

_say = logging.getLogger(RUN_LOGGER)


class EngineChoice(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        tool.get(LatencyRecorder).before_collect.append(self._flush)

    def on_run_start(self, environment, settings) -> None:
        classes = environment.user_classes or []
        if classes:
            _say.info("%s", engine_line(classes, settings.engine))
        missing = batch_logging_missing()
        if missing and any(runs_on_loop(user_class, settings.engine) for user_class in classes):
            _say.warning("engine: %s: each result reaches Locust's statistics on its own, as on greenlets", missing)

    def on_spawning_complete(self, **_kwargs) -> None:
        self._flush()  # before Locust's --reset-stats, which listens after this

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        self._flush()  # the report covers every request until now, the loop's batched ones too

    def on_test_stop(self, environment, **_kwargs) -> None:
        self._flush()  # the users have stopped: their last results, before anything reads the figures

    def _flush(self) -> float | None:
        if self.tool.environment is None:
            return None
        return flush_loop_results(run_context(self.tool.environment))
