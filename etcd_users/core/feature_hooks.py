"""``FeatureHooks``: a feature's part of a run's life cycle, the base class of each feature's hooks, and what they
use of the process's plugin (``Tool``).

``etcd_users.core.features`` lists the features and names their hooks; ``etcd_users.core.plugin`` makes them and calls each
method on the Locust event of its name, in the features' order. What one feature leaves for another goes on the run's
context (``etcd_users.core.run_context``).
"""

from typing import TYPE_CHECKING, NoReturn, Protocol

from etcd_users.core.exit_code import ExitVerdict

# the logger of the lines a run prints about itself, the plugin's, which users have always seen them under
RUN_LOGGER = "etcd_users.core.plugin"

if TYPE_CHECKING:
    from etcd_users.features.target_cluster.cluster import TargetCluster
    from etcd_users.latency.client_cpu import ClientCpu
    from etcd_users.latency.recorder import LatencyRecorder
    from etcd_users.preparation import Preparation
    from etcd_users.settings import EtcdSettings


class Tool(Protocol):
    """What a feature's hooks use of the process's plugin (``etcd_users.core.plugin.EtcdPlugin``)."""

    run_settings: "EtcdSettings | None"  # the master's (or single process's) settings of the current run
    target: "TargetCluster"  # the endpoints given, or the local etcd the tool started (``target.local``)
    recorder: "LatencyRecorder"  # the exact latencies
    client_cpu: "ClientCpu"  # the process's CPU once a second, and on a master its workers'
    ran: bool  # a test started in this process (a master or single process): there is a run to judge
    feature_hooks: "list[FeatureHooks]"  # every feature's hooks, in their order

    def fail(self, message: str, code: int = 2) -> NoReturn:
        """End the process with one line (bad input at start: exit code 2)."""


class FeatureHooks:
    """A feature's part of a run's life cycle. Each method listens to the Locust event of its name, after the
    plugin's own (the run's settings are resolved and the local etcd started by then); by default it does nothing.
    ``tool`` is the process's plugin: the run's settings, the local cluster, the latency recorder."""

    # what the feature wrote before the current (or last) run's measured window, if anything: the summary's
    # ``preparation`` and the reason an empty run gives
    preparation: "Preparation | None" = None

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        pass

    def on_run_start(self, environment, settings: "EtcdSettings") -> None:
        """Called by the plugin, not by Locust, on a master or single process: a run starts with ``settings``, before
        the key space is written and before any feature's ``on_test_start`` (what watches the whole run starts here)."""

    def on_test_start(self, environment, **_kwargs) -> None:
        pass

    def on_spawning_complete(self, **_kwargs) -> None:
        pass

    def on_test_stop(self, environment, **_kwargs) -> None:
        pass

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        """A worker's report about to go: what this feature sends its master."""

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        """A worker's report on the master."""

    def on_quitting(self, environment) -> None:
        """Called by the plugin, not by Locust, in the features' order: once the workers' last reports are in and the
        shape has judged its last levels (the gates' hooks, first, judge the gates here on what the later features
        still hold), right before the plugin decides the exit code from every ``exit_verdict``."""

    def exit_verdict(self, environment) -> ExitVerdict | None:
        """Called by the plugin right after ``on_quitting``, on a master or single process: this feature's verdict on
        the run when it fails it (``etcd_users.core.exit_code`` decides the code from every verdict); None otherwise."""
        return None

    def on_run_files(self) -> None:
        """Called by the plugin at quit, once the exact files are whole and right before it lists the run's files: a
        feature writes a file of ``etcd_users.files`` here to have it listed."""

    def on_run_files_listed(self) -> None:
        """Called by the plugin at quit, right after it lists the run's files, before its clean-up: below Locust's
        summary tables, where a pipeline's log ends (the gates print their verdicts here)."""

    def on_quit(self, **_kwargs) -> None:
        pass
