"""The tool's features: each declares its option group, and those with a life cycle of their own their hooks.

``etcd_users.plugin.install`` walks ``FEATURES`` in order: it registers every group with Locust's parser (the order
of the help and of the web UI's form) and makes each feature's ``FeatureHooks``, whose methods listen to Locust's
events after the plugin's own. The core of a run, the connection, the gates, the members' monitoring and the
exporter, is the plugin's own. What one feature leaves for another (the workers lost, the watchers' tally, the
disruptions' windows) goes on the run's context (``etcd_users.run_context``): no feature looks another's hooks up.
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

if TYPE_CHECKING:
    from etcd_users.latency.recorder import LatencyRecorder
    from etcd_users.reporting.preflight import MemberReport
    from etcd_users.reporting.verdicts import GateVerdicts
    from etcd_users.settings import EtcdSettings
    from etcd_users.target_cluster import TargetCluster


class Tool(Protocol):
    """What a feature's hooks use of the process's plugin (``etcd_users.plugin.EtcdPlugin``)."""

    run_settings: "EtcdSettings | None"  # the master's (or single process's) settings of the current run
    target: "TargetCluster"  # the endpoints given, or the local etcd the tool started (``target.local``)
    recorder: "LatencyRecorder"  # the exact latencies
    ran: bool  # a test started in this process (a master or single process): there is a run to judge
    verdicts: "GateVerdicts"  # the gates' results of the run, judged at quitting
    preflight: "list[MemberReport]"  # the members as the pre-flight found them at start-up
    member_rows: "list[dict] | None"  # the members' polled rows of the current (or last) run; None: not polled

    def fail(self, message: str) -> NoReturn:
        """End the process with one line (bad input at start)."""


class FeatureHooks:
    """A feature's part of a run's life cycle. Each method listens to the Locust event of its name, after the
    plugin's own (the run's settings are resolved and the local etcd started by then); by default it does nothing.
    ``tool`` is the process's plugin: the run's settings, the local cluster, the latency recorder."""

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        pass

    def on_test_start(self, environment, **_kwargs) -> None:
        pass

    def on_test_stop(self, environment, **_kwargs) -> None:
        pass

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        """A worker's report about to go: what this feature sends its master."""

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        """A worker's report on the master."""

    def on_quitting(self, environment) -> None:
        """Called by the plugin, not by Locust: once the workers' last reports are in and the gates are judged,
        right before the plugin decides the exit code from every ``exit_verdict``."""

    def exit_verdict(self, environment) -> ExitVerdict | None:
        """Called by the plugin right after ``on_quitting``, on a master or single process: this feature's verdict on
        the run when it fails it (``etcd_users.exit_code`` decides the code from every verdict); None otherwise."""
        return None

    def on_run_files(self) -> None:
        """Called by the plugin at quit, once the exact files are whole and right before it lists the run's files: a
        feature writes a file of ``etcd_users.files`` here to have it listed."""

    def on_quit(self, **_kwargs) -> None:
        pass


@dataclass(frozen=True)
class Feature:
    name: str
    options: type[OptionGroup]
    # "module:Class" of the feature's FeatureHooks; named, not imported, so that this list stays pure (the reference
    # and the suite runner read it without Locust's monkey patching)
    hooks: str = ""
    etcd_only: bool = True  # False: also for a locustfile whose users are not etcd's (plugin.install(etcd=False))


FEATURES = (
    Feature("connection and endpoints", ConnectionSettings),
    # the gates' hooks watch the workers: a run that lost some is not the run planned, whatever its figures
    Feature("gates", GateSettings, "etcd_users.reporting.worker_watch:WorkerWatch"),
    # the puts per key, counted from the keys' versions at the run's start and stop (PREFIX_skew.json)
    Feature("workload and keys", WorkloadSettings, "etcd_users.reporting.key_skew:KeySkew"),
    Feature("watchers", WatchSettings, "etcd_users.watchers.run:WatchersRun"),
    Feature("monitoring of the members", MonitoringSettings),
    Feature("Prometheus exporter", ExporterSettings),
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


def add_option_groups(parser, etcd: bool = True) -> None:
    """Every feature's group on Locust's parser, once per parser."""
    for feature in features(etcd):
        add_option_group(parser, feature.options.TITLE, feature.options.DESCRIPTION, feature.options.options())
