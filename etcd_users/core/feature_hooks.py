"""``FeatureHooks``: a feature's part of a run's life cycle, the base class of each feature's hooks, and what they
use of the process's plugin (``Tool``).

``etcd_users.core.features`` lists the features and names their hooks; ``etcd_users.core.plugin`` makes them when
Locust builds its parser and calls each method on the Locust event of its name, in the features' order. What one
feature leaves for another goes on the run's context (``etcd_users.core.run_context``) as a slot it owns.
"""

from locust.event import Events

from typing import Any, NoReturn, Protocol, TypeVar

from etcd_users.core.exit_code import ExitVerdict

# the logger of the lines a run prints about itself, the plugin's, which users have always seen them under
RUN_LOGGER = "etcd_users.plugin"

T = TypeVar("T")


class Tool(Protocol):
    """What a feature's hooks use of the process's plugin (``etcd_users.core.plugin.EtcdPlugin``)."""

    events: Events  # Locust's events, for a feature that listens to more than its hooks' methods
    environment: Any  # Locust's environment, once init has come
    run_settings: Any  # the master's (or single process's) settings of the current run (target_cluster sets them)
    ran: bool  # a test started in this process (a master or single process): there is a run to judge
    started_at: float  # when the process started: a file older than this is a previous run's
    feature_hooks: "list[FeatureHooks]"  # every feature's hooks, in their order

    def get(self, kind: type[T]) -> T:
        """The process's instance of a feature's type (the latency recorder, the target cluster), made on first use."""

    def start_run(self, environment, settings) -> None:
        """Every feature's ``on_run_start``, in their order (the target cluster calls it with the run's settings)."""

    def fail(self, message: str, code: int = 2) -> NoReturn:
        """End the process with one line (bad input at start: exit code 2)."""


class FeatureHooks:
    """A feature's part of a run's life cycle. Each method listens to the Locust event of its name, after the
    plugin's own and in the features' order (the target cluster's, which resolves the run's settings and starts the
    local etcd, before those that need them); by default it does nothing. ``tool`` is the process's plugin: the run's
    settings, and the process's instances of the features' types (``tool.get(LatencyRecorder)``)."""

    # what the feature wrote before the current (or last) run's measured window, if anything: the summary's
    # ``preparation`` and the reason an empty run gives
    preparation: Any = None  # an etcd_users.workload_model.preparation.Preparation

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        pass

    def on_init_checked(self, environment) -> None:
        """Called by the plugin once every feature's ``on_init`` has passed: the input is good: a long fill may go."""

    def on_run_start(self, environment, settings) -> None:
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

    def on_cleanup(self, failed: bool) -> None:
        """Called by the plugin at quit, after ``on_run_files_listed``, in the features' reverse order (and when the
        process ends with ``fail``, ``failed``): what the feature opened for the run is closed."""

    def on_quit(self, **_kwargs) -> None:
        pass
