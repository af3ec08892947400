"""A run that measured no request: one line, exit code 1 (``hooks``)."""

from etcd_users.core.features import Feature

FEATURE = Feature("empty run", hooks="hooks:EmptyRun", docs="troubleshooting.md")
