"""The tool's features: each declares its option group, and those with a life cycle of their own their hooks.

``etcd_users.plugin.install`` walks ``FEATURES`` in order: it registers every group with Locust's parser (the order
of the help and of the web UI's form) and calls each feature's ``install(events)``, which adds the feature's
listeners after the plugin's own (the run's settings are resolved and the local etcd started by then). The core
of a run, the connection, the gates, the members' monitoring and the exporter, is wired by the plugin itself.
"""

from dataclasses import dataclass

from etcd_users.arguments import add_option_group
from etcd_users.settings import (
    AuditSettings,
    ConnectionSettings,
    ExporterSettings,
    GateSettings,
    KubeSettings,
    MonitoringSettings,
    OptionGroup,
    WorkloadSettings,
)
from etcd_users.shapes.options import ShapeSettings


@dataclass(frozen=True)
class Feature:
    name: str
    options: type[OptionGroup]
    # "module:function" of the feature's install(events), its own listeners; named, not imported, so that this list
    # stays pure (the reference and the suite runner read it without Locust's monkey patching)
    install: str = ""
    etcd_only: bool = True  # False: also for a locustfile whose users are not etcd's (plugin.install(etcd=False))


FEATURES = (
    Feature("connection and endpoints", ConnectionSettings),
    Feature("gates", GateSettings),
    Feature("workload and keys", WorkloadSettings),
    Feature("monitoring of the members", MonitoringSettings),
    Feature("Prometheus exporter", ExporterSettings),
    Feature("Kubernetes-shaped traffic", KubeSettings, "etcd_users.kubernetes.run:install"),
    Feature("load shapes", ShapeSettings, etcd_only=False),
    Feature("audit", AuditSettings, "etcd_users.audit.run:install"),
)


def features(etcd: bool = True) -> tuple[Feature, ...]:
    """The features of a locustfile with the etcd users (``etcd``), or of one whose users are not etcd's."""
    return tuple(feature for feature in FEATURES if etcd or not feature.etcd_only)


def add_option_groups(parser, etcd: bool = True) -> None:
    """Every feature's group on Locust's parser, once per parser."""
    for feature in features(etcd):
        add_option_group(parser, feature.options.TITLE, feature.options.DESCRIPTION, feature.options.options())
