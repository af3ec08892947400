"""The exact latencies and the client's CPU on Locust's events: the recorder listens to every request from the moment
its hooks are made, before the runner exists; at quit it writes the exact files first and, once every feature has
written its own, prints the exact table and lists the run's files."""

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.latency import end_of_run, final_stats
from etcd_users.judging.judged import judged_shape
from etcd_users.latency.client_cpu import ClientCpu
from etcd_users.latency.recorder import LatencyRecorder


class LatencyHooks(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.recorder = tool.get(LatencyRecorder)
        self.client_cpu = tool.get(ClientCpu)
        tool.events.request.add_listener(self.recorder.record)  # the hot path: the latency store's own method
        tool.events.reset_stats.add_listener(lambda **_kwargs: self.recorder.on_reset_stats())

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        self.recorder.environment = self.client_cpu.environment = environment

    def on_test_start(self, environment, **_kwargs) -> None:
        self.recorder.on_test_start()
        self.client_cpu.on_test_start()

    def on_spawning_complete(self, **_kwargs) -> None:
        self.recorder.on_spawning_complete()

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_report_to_master(data)
        self.client_cpu.on_report_to_master(data)

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        self.recorder.on_worker_report(data, client_id)
        self.client_cpu.on_worker_report(client_id, data)

    def on_test_stop(self, environment, **_kwargs) -> None:
        self.recorder.on_test_stop()

    def on_quitting(self, environment) -> None:
        # a shape judging its levels live (shapes.base.PlannedShape) judges those still waiting, on the final figures
        shape = judged_shape(environment)
        if shape is not None and run_context(environment).role.judges:
            shape.judge_remaining_levels()
        self.recorder.on_quitting()

    def exit_verdict(self, environment):
        if run_context(environment).role.judges:  # with --json(-file): before Locust clears its per-name figures
            final_stats.at_quitting(environment)
        return None

    def on_run_files(self) -> None:
        self.recorder.on_quit()  # the exact files, whole: the workers' last reports are in
        self.client_cpu.on_quit()

    def on_run_files_listed(self) -> None:
        environment = self.tool.environment
        if environment is not None and run_context(environment).role.judges:
            settings = self.tool.run_settings
            junit_path = (settings.gates.junit or None) if settings is not None else None
            end_of_run.at_quit(environment, self.recorder, junit_path, since=self.tool.started_at)
