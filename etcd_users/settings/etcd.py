"""The settings of a run: the connection and the workload, every request reads them, and each feature's slice."""

import argparse
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import SettingsError
from etcd_users.settings.audit import AuditSettings
from etcd_users.settings.connection import ConnectionSettings
from etcd_users.settings.disruption_actions import ADD_LEARNER
from etcd_users.settings.disruptions import DisruptionSettings
from etcd_users.settings.exporter import ExporterSettings
from etcd_users.settings.gates import GateSettings
from etcd_users.settings.kubernetes import RAISE_LIMIT, REQUEST_OVERHEAD_BYTES, KubeSettings
from etcd_users.settings.monitoring import MonitoringSettings
from etcd_users.settings.network import check_zones, example_zones, timing_ms
from etcd_users.settings.summary import SummarySettings
from etcd_users.settings.watch import WatchSettings
from etcd_users.settings.workload import WorkloadSettings

# each further put of a txn adds this much to etcd's raft entry
TXN_OP_OVERHEAD_BYTES = 16


@dataclass(frozen=True, kw_only=True)
class EtcdSettings(ConnectionSettings, WorkloadSettings):
    """Flat where the request path reads (connection and workload), a slice for each other feature."""

    gates: GateSettings
    monitoring: MonitoringSettings
    exporter: ExporterSettings
    k8s: KubeSettings
    disruptions: DisruptionSettings
    summary: SummarySettings
    watch: WatchSettings
    audit: AuditSettings

    @classmethod
    def build(cls, values, namespace, **context):
        settings = cls(
            **values,
            gates=GateSettings.from_options(namespace),
            monitoring=MonitoringSettings.from_options(namespace, endpoints=values["endpoints"]),
            exporter=ExporterSettings.from_options(namespace),
            k8s=KubeSettings.from_options(
                namespace, prefix=values["prefix"], max_request_bytes=values["max_request_bytes"]
            ),
            disruptions=DisruptionSettings.from_options(namespace),
            summary=SummarySettings.from_options(namespace),
            watch=WatchSettings.from_options(namespace),
            audit=AuditSettings.from_options(namespace),
        )
        settings.check_keys()
        timing_ms(settings.local_heartbeat, settings.local_election)
        _check_zones(settings)
        _check_request_sizes(settings)
        _check_disruption_gates(settings)
        _check_watch_keys(settings)
        _check_member_gates(settings)
        return settings.with_credentials()


def settings_from_options(options: argparse.Namespace) -> EtcdSettings:
    """Validate the parsed ``--etcd-*`` options (also as the web UI sends them) into settings.

    Each value is checked for what it means, not only for its type: finite numbers, sizes that fit in one etcd
    request, lists without empty entries, URLs that parse, PEM files that OpenSSL loads, and a prefix that is a
    directory. Bad input is one line (``SettingsError``) that names the option, quotes long input shortened.
    """
    return EtcdSettings.from_options(options)


def _check_zones(settings: EtcdSettings) -> None:
    """Zones of the local etcd (those given with --etcd-endpoints are refused where the endpoints are known:
    ``target_cluster``), and the zone a member added joins, which needs them."""
    if settings.local_zones and settings.endpoints:
        return
    zones, zone_rtt, peer_rtt = settings.local_zones, settings.local_zone_rtt, settings.local_peer_rtt
    check_zones(zones, zone_rtt, peer_rtt, settings.local_members)
    zoned = next((d for d in settings.disruptions.schedule if d.action == ADD_LEARNER and d.value), None)
    if zoned is not None and not zones and not settings.endpoints:
        raise SettingsError(
            f"--etcd-disrupt: {shown(zoned.text)} puts the new member in zone {zoned.value}, and the local etcd has no "
            f"zones; give --etcd-local-zones (e.g. {example_zones(settings.local_members)}) or leave out "
            f"={zoned.value}"
        )


def _check_disruption_gates(settings: EtcdSettings) -> None:
    """A ``disrupt:`` gate judges the windows of ``--etcd-disrupt``: without a schedule it could never pass."""
    gate = next((gate for gate in settings.gates.sla if gate.disrupt), None)
    if gate is not None and not settings.disruptions.schedule:
        raise SettingsError(
            f"--etcd-sla: {shown(gate.text)} judges each disruption, and --etcd-disrupt schedules none; add one such "
            "as --etcd-disrupt defrag:leader@60s, or drop the gate"
        )


def _check_watch_keys(settings: EtcdSettings) -> None:
    if settings.watch.keys > settings.key_space_size:
        raise SettingsError(
            f"--etcd-watch-keys: {shown(settings.watch.keys)} keys are more than the key space's "
            f"{settings.key_space_size} (--etcd-key-space-size); give at most that, or 0 for the whole prefix"
        )


def _check_member_gates(settings: EtcdSettings) -> None:
    """A ``member:`` gate reads the members' /metrics as polled during the run: without polling it has nothing."""
    gate = next((gate for gate in settings.gates.sla if gate.member), None)
    if gate is not None and settings.monitoring.metrics_interval <= 0:
        raise SettingsError(
            f"--etcd-sla: {shown(gate.text)} judges the members' /metrics, and --etcd-metrics-interval 0 polls none; "
            "give an interval such as --etcd-metrics-interval 5, or drop the gate"
        )


def _check_request_sizes(settings: EtcdSettings) -> None:
    """A put (key + value), a transaction of --etcd-txn-ops puts and the key alone fit in one etcd request."""
    key_size, val_size, txn_ops = settings.key_size, settings.val_size, settings.txn_ops
    max_bytes = settings.max_request_bytes
    user = settings.user.partition(":")[0]
    overhead = REQUEST_OVERHEAD_BYTES + len(user.encode())  # the request's header carries the user name
    limit = f"etcd's --max-request-bytes, 1.5 MiB by default (--etcd-max-request-bytes {max_bytes} here)"
    if key_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-key-size: {shown(key_size)} makes every request larger than {limit}; use at most "
            f"{max_bytes - overhead} {RAISE_LIMIT}"
        )
    if key_size + val_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-val-size: a put of a {key_size}-byte key and a {shown(val_size)}-byte value is larger than "
            f"{limit}; use at most {max_bytes - overhead - key_size} {RAISE_LIMIT}"
        )
    per_put = key_size + val_size + TXN_OP_OVERHEAD_BYTES
    if overhead - TXN_OP_OVERHEAD_BYTES + txn_ops * per_put > max_bytes:
        most = (max_bytes - overhead + TXN_OP_OVERHEAD_BYTES) // per_put
        raise SettingsError(
            f"--etcd-txn-ops: a transaction of {txn_ops} puts of {key_size}+{val_size} bytes is larger than "
            f"{limit}; use at most {most} puts or a smaller --etcd-val-size, {RAISE_LIMIT}"
        )
