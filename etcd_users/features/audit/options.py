"""The audit at the end of a run that wrote: the members' HashKV, the acknowledged writes read back, the watch streams'
order (``etcd_users.features.audit``)."""

from dataclasses import dataclass

from etcd_users.core.declare import OptionGroup, option, positive, switch


@dataclass(frozen=True, kw_only=True)
class AuditSettings(OptionGroup):
    TITLE = "etcd audit"
    DESCRIPTION = "What the run wrote, checked at its end: members' HashKV, acknowledged writes, watch streams"
    SLICE = "audit"

    skip: bool = option(
        "--etcd-skip-audit",
        False,
        "Skip the audit at the end of a run that wrote: every member's HashKV at one revision, each acknowledged "
        "write read back, and the order of the watch streams' events (a failed audit exits with code 4).",
        parse=switch,
    )
    wait: float = option(
        "--etcd-audit-wait",
        30.0,
        "Seconds the audit waits, before it compares them, for every member to answer and reach the cluster's raft "
        "index (a member killed or restarted as the run ends), and for a member to read the acknowledged writes back "
        "from. A member still silent then is named and fails the audit (exit code 4).",
        parse=positive,
    )
