"""The tool's features, in one list: each declares its option group, and those with a life cycle of their own their
hooks (``etcd_users.core.feature_hooks.FeatureHooks``).

``FEATURES`` is the only list of them: its order is the order of the help, of the option reference, of the web UI's
form (``OPTIONS``) and of the hooks. ``etcd_users.core.plugin.install`` walks it: it registers every group with Locust's
parser and makes each feature's ``FeatureHooks``, whose methods listen to Locust's events after the plugin's own.
What one feature leaves for another (the members' rows, the gates' results, the workers lost, the watchers' tally,
the disruptions' windows) goes on the run's context (``etcd_users.core.run_context``): no feature looks another's hooks up.

Pure: the hooks are named, not imported, so that the reference and the suite runner read this list without Locust.
"""

from dataclasses import dataclass

from etcd_users.core.arguments import add_option_group
from etcd_users.features.shapes.options import ShapeSettings
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
    # which way each User class sends its requests (--etcd-engine, a workload option): the run's start line
    Feature("engine", None, "etcd_users.features.engine.choice:EngineChoice"),
    # the gates' hooks watch the workers: a run that lost some is not the run planned, whatever its figures
    Feature("gates", GateSettings, "etcd_users.features.gates.hooks:GatesRun"),
    # the puts per key, counted from the keys' versions at the run's start and stop (PREFIX_skew.json)
    Feature("workload and keys", WorkloadSettings, "etcd_users.features.workload.key_skew:KeySkew"),
    Feature("watchers", WatchSettings, "etcd_users.features.watchers.run:WatchersRun"),
    # before the members' watch: a port taken is refused at init before the pre-flight's burst reaches the members
    Feature("Prometheus exporter", ExporterSettings, "etcd_users.features.exporter.exporter:ExporterRun"),
    # the pre-flight report, the members' /metrics, the db against its quota, compaction, the capture at a breach
    Feature("monitoring of the members", MonitoringSettings, "etcd_users.features.monitoring.hooks:MembersWatch"),
    # the web UI's etcd tabs and its start form (on a master or single process with a web UI)
    Feature("web UI", None, "etcd_users.features.webui.tabs:WebUiTabs"),
    Feature("Kubernetes-shaped traffic", KubeSettings, "etcd_users.features.kubernetes.run:KubernetesRun"),
    Feature("disruptions", DisruptionSettings, "etcd_users.features.disruptions.runner:Disruptions"),
    Feature("load shapes", ShapeSettings, etcd_only=False),
    Feature("audit", AuditSettings, "etcd_users.features.audit.run:AuditRun"),
    # last: it gathers what the others left (the gates, the disruptions, the audit) at quit
    Feature("run summary", SummarySettings, "etcd_users.features.summary.summary:RunSummary"),
    # whether the load generator was the limit: a rate's processes early, the client-bound line at the end
    Feature("client bound", None, "etcd_users.features.client_bound.hooks:ClientBound", etcd_only=False),
    # after every other's judging: a run that measured no request, its line printed last but one
    Feature("empty run", None, "etcd_users.features.empty_run.hooks:EmptyRun"),
    # an --etcd-user-rate the users did not hold: the run's last line
    Feature("rate held", None, "etcd_users.features.rate_held.hooks:RateShortfall"),
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
# etcd's users has too (the shapes', etcd_users.features.shapes.options.OPTIONS)
OPTIONS = tuple(
    declared for feature in FEATURES if feature.etcd_only and feature.options for declared in feature.options.options()
)
