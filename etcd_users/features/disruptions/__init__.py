"""Disruptions during a run (``--etcd-disrupt``): the schedule's grammar, the runner that acts on the members, and
the cost of each disruption to the requests."""

from etcd_users.core.features import Feature
from etcd_users.features.disruptions.options import DisruptionSettings

FEATURE = Feature(
    "disruptions",
    DisruptionSettings,
    hooks="runner:Disruptions",
    docs="disruptions.md",
)
