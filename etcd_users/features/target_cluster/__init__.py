"""The cluster a run loads: the endpoints given or a local etcd started for the run (``TargetCluster``, shared:
``etcd_users.target.cluster``), what a master refuses at init (``checks``), and the hooks that resolve the run's
settings and clean up after it (``hooks``)."""

from etcd_users.core.features import Feature

FEATURE = Feature("target cluster", hooks="hooks:TargetClusterHooks", docs="getting-started.md")
