"""The endpoints and the connections: the options every request reads (``etcd_users.settings.connection``)."""

from etcd_users.core.features import Feature
from etcd_users.settings import ConnectionSettings

FEATURE = Feature("connection and endpoints", ConnectionSettings, docs="getting-started.md")
