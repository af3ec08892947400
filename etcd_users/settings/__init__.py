"""The settings of a run, one frozen dataclass per feature, each field declared once as its option
(``etcd_users.core.declare``): connection, workload, gates, monitoring, exporter, Kubernetes traffic and
disruptions. The shapes' live in ``etcd_users.features.shapes.options``.

Pure: nothing of Locust, gRPC or the run, so the suite runner, the tests and the analysis can validate options
without gevent's monkey patching. ``etcd_users.core.features`` lists the groups in their order (``OPTIONS``) and
registers them with Locust.
"""

from etcd_users.core.declare import OptionGroup, SettingsError, option
from etcd_users.settings.audit import AuditSettings
from etcd_users.settings.connection import (
    CLIENT_MAX_SEND_BYTES,
    ConnectionSettings,
    Credentials,
    Endpoint,
    parse_endpoints,
)
from etcd_users.settings.disruptions import DisruptionSettings
from etcd_users.settings.etcd import EtcdSettings, settings_from_options
from etcd_users.settings.exporter import ExporterSettings
from etcd_users.settings.gates import (
    LATENCY_UNITS,
    OPERATORS,
    Gate,
    GateSettings,
    SlaError,
    disruption_gates,
    member_gates,
    parse_gate,
    parse_gates,
    parse_junit_path,
    request_gates,
    stale_gates,
)
from etcd_users.settings.kubernetes import KubeSettings
from etcd_users.settings.monitoring import MonitoringSettings
from etcd_users.settings.summary import SummarySettings
from etcd_users.settings.watch import WatchSettings
from etcd_users.settings.workload import DEFAULT_PREFIX, WorkloadSettings, parse_prefix

__all__ = [
    "AuditSettings",
    "CLIENT_MAX_SEND_BYTES",
    "DEFAULT_PREFIX",
    "ConnectionSettings",
    "DisruptionSettings",
    "ExporterSettings",
    "GateSettings",
    "MonitoringSettings",
    "SummarySettings",
    "WatchSettings",
    "WorkloadSettings",
    "parse_junit_path",
    "LATENCY_UNITS",
    "OPERATORS",
    "Credentials",
    "Endpoint",
    "EtcdSettings",
    "Gate",
    "KubeSettings",
    "OptionGroup",
    "SettingsError",
    "SlaError",
    "option",
    "parse_endpoints",
    "parse_gate",
    "parse_gates",
    "request_gates",
    "disruption_gates",
    "member_gates",
    "stale_gates",
    "parse_prefix",
    "settings_from_options",
]
