"""Disruptions: what the run does to the members while the load goes on (``--etcd-disrupt``), and whether it may."""

from dataclasses import dataclass

from etcd_users.disruptions.action_table import help_text, markdown_table, names, said
from etcd_users.disruptions.schedule import ALLOWED_FLAG, EXAMPLE, FLAG, Disruption, ScheduleError, parse_schedule
from etcd_users.settings.declare import OptionGroup, SettingsError, option, switch


def _schedule(flag: str, text: str) -> tuple[Disruption, ...]:
    try:
        return parse_schedule(flag, text)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None


@dataclass(frozen=True, kw_only=True)
class DisruptionSettings(OptionGroup):
    TITLE = "etcd disruptions"
    DESCRIPTION = "Defragment, move the leader, snapshot, compact, kill or freeze members at set times during the run"
    REFERENCE = f"The actions of `{FLAG}`:\n\n{markdown_table()}"

    schedule: tuple[Disruption, ...] = option(
        FLAG,
        "",
        "Comma-separated ACTION[:MEMBER]@TIME[+DURATION], TIME from the run's start, e.g. "
        f"{EXAMPLE}. Actions: {help_text()}. MEMBER: leader, follower, all (defrag) or a client URL. Each becomes a "
        "window in PREFIX_disruptions.json with its cost to the requests.",
        parse=_schedule,
    )
    allowed: bool = option(
        ALLOWED_FLAG,
        False,
        f"Allow {FLAG} on endpoints the tool did not start (--etcd-endpoints): "
        f"{said(names(local_only=False), 'and')} act on that cluster as a whole.",
        parse=switch,
    )

    @property
    def items(self) -> tuple[str, ...]:
        """The schedule's items in the order the runner does them (by time), as their windows name them."""
        return tuple(disruption.text for disruption in sorted(self.schedule, key=lambda d: d.at))
