"""The settings every request reads, and the run's: the connection and the workload, each field declared once as its
option (``etcd_users.core.declare``), and ``EtcdSettings``, which adds a slice for each feature with options of its
own (the feature's ``options`` module: ``etcd_users.features.audit.options``); the local etcd's peer network.

Pure: nothing of Locust, gRPC or the run, so the suite runner, the tests and the analysis can validate options
without gevent's monkey patching. ``etcd_users.core.features`` lists the groups in their order (``OPTIONS``) and
registers them with Locust.
"""

from etcd_users.core.declare import OptionGroup, SettingsError, option
from etcd_users.settings.connection import (
    CLIENT_MAX_SEND_BYTES,
    ConnectionSettings,
    Credentials,
    Endpoint,
    parse_endpoints,
)
from etcd_users.settings.etcd import EtcdSettings, settings_from_options
from etcd_users.settings.workload import DEFAULT_PREFIX, WorkloadSettings, parse_prefix

__all__ = [
    "CLIENT_MAX_SEND_BYTES",
    "DEFAULT_PREFIX",
    "ConnectionSettings",
    "Credentials",
    "Endpoint",
    "EtcdSettings",
    "OptionGroup",
    "SettingsError",
    "WorkloadSettings",
    "option",
    "parse_endpoints",
    "parse_prefix",
    "settings_from_options",
]
