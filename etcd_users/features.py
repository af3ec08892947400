"""The tool's features, in one list: each declares its option group, and those with a life cycle of their own their
hooks.

``FEATURES`` is the only list of them: its order is the order of the help, of the option reference, of the web UI's
form (``OPTIONS``) and of the hooks. ``etcd_users.plugin.install`` walks it: it registers every group with Locust's
parser and makes each feature's ``FeatureHooks``, whose methods listen to Locust's events after the plugin's own.
What one feature leaves for another (the members' rows, the gates' results, the workers lost, the watchers' tally,
the disruptions' windows) goes on the run's context (``etcd_users.run_context``): no feature looks another's hooks up.

Pure: the hooks are named, not imported, so that the reference and the suite runner read this list without Locust.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, Protocol

from etcd_users.arguments import add_option_group
from etcd_users.exit_code import ExitVerdict
from etcd_users.settings import (
    AuditSettings,
    ConnectionSettings,
    DisruptionSettings,
    ExporterSettings,
    GateSettings,
    KubeSettings,
    MonitoringSettings,
    OptionGroup,
    SummarySettings,
    WatchSettings,
    WorkloadSettings,
)
from etcd_users.shapes.options import ShapeSettings

# the logger of the lines a run prints about itself, the plugin's, which users have always seen them under
RUN_LOGGER = "etcd_users.plugin"

if TYPE_CHECKING:
    from etcd_users.latency.recorder import LatencyRecorder
    from etcd_users.preparation import Preparation
    from etcd_users.settings import EtcdSettings
    from etcd_users.target_cluster import TargetCluster


class Tool(Protocol):
    """What a feature's hooks use of the process's plugin (``etcd_users.plugin.EtcdPlugin``)."""

    run_settings: "EtcdSettings | None"  # the master's (or single process's) settings of the current run
    target: "TargetCluster"  # the endpoints given, or the local etcd the tool started (``target.local``)
    recorder: "LatencyRecorder"  # the exact latencies
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
        the run when it fails it (``etcd_users.exit_code`` decides the code from every verdict); None otherwise."""
        return None

    def on_run_files(self) -> None:
        """Called by the plugin at quit, once the exact files are whole and right before it lists the run's files: a
        feature writes a file of ``etcd_users.files`` here to have it listed."""

    def on_run_files_listed(self) -> None:
        """Called by the plugin at quit, right after it lists the run's files, before its clean-up: below Locust's
        summary tables, where a pipeline's log ends (the gates print their verdicts here)."""

    def on_quit(self, **_kwargs) -> None:
        pass


@dataclass(frozen=True)
class Feature:
    name: str
    options: type[OptionGroup] | None  # None: a feature without options of its own
    # "module:Class" of the feature's FeatureHooks; named, not imported, so that this list stays pure (the reference
    # and the suite runner read it without Locust's monkey patching)
    hooks: str = ""
    etcd_only: bool = True  # False: also for a locustfile whose users are not etcd's (plugin.install(etcd=False))


FEATURES = (
    Feature("connection and endpoints", ConnectionSettings),
    # the gates' hooks watch the workers: a run that lost some is not the run planned, whatever its figures
    Feature("gates", GateSettings, "etcd_users.reporting.gates_run:GatesRun"),
    # the puts per key, counted from the keys' versions at the run's start and stop (PREFIX_skew.json)
    Feature("workload and keys", WorkloadSettings, "etcd_users.reporting.key_skew:KeySkew"),
    Feature("watchers", WatchSettings, "etcd_users.watchers.run:WatchersRun"),
    # before the members' watch: a port taken is refused at init before the pre-flight's burst reaches the members
    Feature("Prometheus exporter", ExporterSettings, "etcd_users.reporting.exporter:ExporterRun"),
    # the pre-flight report, the members' /metrics, the db against its quota, compaction, the capture at a breach
    Feature("monitoring of the members", MonitoringSettings, "etcd_users.members_watch:MembersWatch"),
    # the web UI's etcd tabs and its start form (on a master or single process with a web UI)
    Feature("web UI", None, "etcd_users.reporting.webui:WebUiTabs"),
    Feature("Kubernetes-shaped traffic", KubeSettings, "etcd_users.kubernetes.run:KubernetesRun"),
    Feature("disruptions", DisruptionSettings, "etcd_users.disruptions.runner:Disruptions"),
    Feature("load shapes", ShapeSettings, etcd_only=False),
    Feature("audit", AuditSettings, "etcd_users.audit.run:AuditRun"),
    # last: it gathers what the others left (the gates, the disruptions, the audit) at quit
    Feature("run summary", SummarySettings, "etcd_users.reporting.summary:RunSummary"),
)


def features(etcd: bool = True) -> tuple[Feature, ...]:
    """The features of a locustfile with the etcd users (``etcd``), or of one whose users are not etcd's."""
    return tuple(feature for feature in FEATURES if etcd or not feature.etcd_only)


def option_groups(etcd: bool = True) -> tuple[type[OptionGroup], ...]:
    """The features' option groups, in their order."""
    return tuple(feature.options for feature in features(etcd) if feature.options is not None)


def add_option_groups(parser, etcd: bool = True) -> None:
    """Every feature's group on Locust's parser, once per parser."""
    for group in option_groups(etcd):
        add_option_group(parser, group.TITLE, group.DESCRIPTION, group.options())


# the --etcd-* options in the order of the help and the web UI's form: every feature's but those a locustfile without
# etcd's users has too (the shapes', etcd_users.shapes.options.OPTIONS)
OPTIONS = tuple(
    declared for feature in FEATURES if feature.etcd_only and feature.options for declared in feature.options.options()
)
