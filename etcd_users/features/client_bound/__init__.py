"""Whether the load generator was the limit: a rate that needs more processes, said early; a client that was the
limit, said at the end (``hooks``)."""

from etcd_users.core.features import Feature

FEATURE = Feature("client bound", hooks="hooks:ClientBound", docs="performance.md", etcd_only=False)
