"""The members during a run, apart from the load's own figures (what other features read of them is shared, in
``etcd_users.members``: the pre-flight, their /metrics, their figures, the workers lost, the members found).

- ``space``: the db against its quota, etcd's NOSPACE alarm; ``breach``: the members' profiles when a gate first
  fails;
- ``during_run``: the master's watch over the members during one run (``RunMonitoring``).

The hooks that start them are ``etcd_users.features.monitoring.hooks`` and ``etcd_users.features.gates.worker_watch``.
"""

from etcd_users.core.features import Feature
from etcd_users.features.monitoring.options import MonitoringSettings

FEATURE = Feature(
    "monitoring of the members",
    MonitoringSettings,
    hooks="hooks:MembersWatch",
    docs="faults.md",
)
