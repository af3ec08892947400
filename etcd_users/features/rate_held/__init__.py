"""An ``--etcd-user-rate`` the users did not hold: the run's last line (``hooks``)."""

from etcd_users.core.features import Feature

FEATURE = Feature("rate held", hooks="hooks:RateShortfall", docs="workloads.md")
