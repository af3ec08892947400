"""The audit at the end of a run that wrote: the members' HashKV, the acknowledged writes read back, the watch streams'
order (``etcd_users.audit``)."""

from dataclasses import dataclass

from etcd_users.settings.declare import OptionGroup, option, switch


@dataclass(frozen=True, kw_only=True)
class AuditSettings(OptionGroup):
    TITLE = "etcd audit"
    DESCRIPTION = "What the run wrote, checked at its end: members' HashKV, acknowledged writes, watch streams"

    skip: bool = option(
        "--etcd-skip-audit",
        False,
        "Skip the audit at the end of a run that wrote: every member's HashKV at one revision, each acknowledged "
        "write read back, and the order of the watch streams' events (a failed audit exits with code 4).",
        parse=switch,
    )
