"""The members and the workers as a run finds them, apart from the load's own figures.

- ``preflight``: each member's version, db size against quota and WAL fsync P99 before the load starts;
- ``server_metrics``: every member's /metrics polled during the run into ``PREFIX_etcd_metrics.csv``; ``buckets``:
  etcd's Prometheus histograms; ``member_figures``: the members' figures over a span, worst member first;
- ``space``: the db against its quota, etcd's NOSPACE alarm; ``breach``: the members' profiles when a gate first
  fails;
- ``during_run``: the master's watch over the members during one run (``RunMonitoring``);
- ``lost_workers``: workers lost during a run, in words and in the summary's terms.

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
