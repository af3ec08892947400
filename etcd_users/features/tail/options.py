"""The tail's option: how many of a run's worst seconds it explains."""

from dataclasses import dataclass

from etcd_users.core.declare import OptionGroup, option, zero_or_more


@dataclass(frozen=True)
class TailSettings(OptionGroup):
    TITLE = "tail of a run"
    DESCRIPTION = "The run's worst seconds, each with what the members and the client did around it"
    SLICE = "tail"

    worst: int = option(
        "--etcd-tail",
        10,
        "How many of the run's worst seconds (by exact P99; every second with errors too) to print at its end as "
        "tail: lines, each with the events within 1 s of it: the members' /metrics read every second (up to 5 "
        "members), the tool's disruptions and the client's CPU, GC pauses, late threads and reconnects (0: off).",
        parse=zero_or_more,
    )
