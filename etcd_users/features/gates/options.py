"""Gates: the thresholds a run is judged by (``--etcd-sla``) and where the verdicts go for CI (``--etcd-junit``).

The grammar of a gate is in ``etcd_users.judging.sla_specs``; ``etcd_users.judging.sla`` judges them.
"""

from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, option
from etcd_users.judging.sla_specs import Gate, parse_gates, parse_junit_path


def _gates(_flag: str, text: str) -> tuple[Gate, ...]:
    return parse_gates(text)


def _junit(_flag: str, path: str) -> str:
    return parse_junit_path(path)


@dataclass(frozen=True, kw_only=True)
class GateSettings(OptionGroup):
    TITLE = "etcd gates"
    DESCRIPTION = "Thresholds the run is judged by, and their report for CI"
    SLICE = "gates"

    sla: tuple[Gate, ...] = option(
        "--etcd-sla",
        "",
        "Gates checked when the run ends, as [NAME:]METRIC<VALUE,… e.g. put:p99<15ms,range/serializable:p99.9<10ms,"
        "errors<0.1%,qps>1000 (no NAME: all requests); disrupt:[NAME:]METRIC<VALUE (gap, p99, p99.9, errors) "
        "judges each window of --etcd-disrupt, e.g. disrupt:gap<2s; member:METRIC<VALUE (fsync_p99, commit_p99, "
        "peer_rtt_p99, snapshot_p99, leader_changes, slow_applies, db_quota) judges the worst member's own metrics, "
        "e.g. member:fsync_p99<10ms (needs --etcd-metrics-interval); stale:METRIC<VALUE judges how far behind the "
        "worst member's serializable reads were, in time (stale:p99<100ms) or revisions (stale:revisions:p99<50); "
        "kubernetes-etcd stands for Kubernetes' etcd "
        "thresholds. Each is printed with PASS or FAIL, and a failed gate makes the exit code 3.",
        parse=_gates,
    )
    junit: str = option(
        "--etcd-junit",
        "",
        "Write the SLA gates (and a shape's per-level verdicts) as a JUnit XML report to this file when the run ends, "
        "for CI test reports; the file is written whether gates fail or not. Empty: none.",
        parse=_junit,
    )

    @classmethod
    def check_run(cls, settings) -> None:
        # a disrupt: gate judges the windows of --etcd-disrupt: without a schedule it could never pass
        gate = next((gate for gate in settings.gates.sla if gate.disrupt), None)
        if gate is not None and not settings.disruptions.schedule:
            raise SettingsError(
                f"--etcd-sla: {shown(gate.text)} judges each disruption, and --etcd-disrupt schedules none; add one "
                "such as --etcd-disrupt defrag:leader@60s, or drop the gate"
            )
        # a member: gate reads the members' /metrics as polled during the run: without polling it has nothing
        gate = next((gate for gate in settings.gates.sla if gate.member), None)
        if gate is not None and settings.monitoring.metrics_interval <= 0:
            raise SettingsError(
                f"--etcd-sla: {shown(gate.text)} judges the members' /metrics, and --etcd-metrics-interval 0 polls "
                "none; give an interval such as --etcd-metrics-interval 5, or drop the gate"
            )
