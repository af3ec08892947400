"""Disruptions: what the run does to the members while the load goes on (``--etcd-disrupt``), and whether it may."""

from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, option, switch
from etcd_users.features.disruptions.command_match import check_commands, parse_commands
from etcd_users.features.disruptions.schedule import (
    ALLOWED_FLAG,
    COMMAND_FLAG,
    EXAMPLE,
    FLAG,
    Disruption,
    ScheduleError,
    check_upgrades,
    parse_schedule,
)
from etcd_users.settings.connection import local_binary_form_error
from etcd_users.settings.network import example_zones
from etcd_users.target.action_table import (
    ACTIONS,
    ADD_LEARNER,
    MEMBERSHIP_ACTIONS,
    UPGRADE_FLAG,
    help_text,
    markdown_table,
    names,
    said,
)


def _schedule(flag: str, text: str) -> tuple[Disruption, ...]:
    try:
        return parse_schedule(flag, text)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None


def _commands(flag: str, values: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    try:
        return parse_commands(flag, values)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None


def _upgrade_binary(flag: str, text: str) -> str:
    """A path or a version in form, as --etcd-local-binary takes; the etcd it names is found when the local etcd
    starts."""
    unknown = local_binary_form_error(text, flag)
    if unknown:
        raise SettingsError(unknown)
    return text.strip()


@dataclass(frozen=True, kw_only=True)
class DisruptionSettings(OptionGroup):
    TITLE = "etcd disruptions"
    DESCRIPTION = (
        "Defragment, move the leader, snapshot, compact, kill, freeze, upgrade or roll back members, add, promote or "
        "remove members, or run commands of your own, at set times during the run"
    )
    SLICE = "disruptions"
    REFERENCE = f"The actions of `{FLAG}`:\n\n{markdown_table()}"

    schedule: tuple[Disruption, ...] = option(
        FLAG,
        "",
        "Comma-separated ACTION[:MEMBER]@TIME[+DURATION], TIME from the run's start, e.g. "
        f"{EXAMPLE}. Actions: {help_text()}. MEMBER: leader, follower, all (defrag, upgrade, rollback) or a client "
        "URL. Each becomes a window in PREFIX_disruptions.json with its cost to the requests.",
        parse=_schedule,
    )
    allowed: bool = option(
        ALLOWED_FLAG,
        False,
        f"Allow {FLAG} on endpoints the tool did not start (--etcd-endpoints): "
        f"{said(names(local_only=False, outside=False), 'and')} act on that cluster as a whole. exec, a command of "
        "your own, needs it on any cluster.",
        parse=switch,
    )
    commands: tuple[tuple[str, tuple[str, ...]], ...] = option(
        COMMAND_FLAG,
        "",
        f"NAME=COMMAND, once per command, for {FLAG}'s exec:NAME@TIME[+TIMEOUT]: split like a shell's words, run "
        "without a shell (sh -c '…' for one) on the master, ETCDCTL_ENDPOINTS set to the run's endpoints unless set.",
        parse=_commands,
        repeatable=True,
    )
    upgrade_binary: str = option(
        UPGRADE_FLAG,
        "",
        f"The etcd that {FLAG}'s upgrade restarts members of the local etcd on, on their data dirs: a path "
        "(/usr/bin/etcd) or a version found on the machine (3.5, 3.5.1), as --etcd-local-binary takes; rollback goes "
        "back to the local etcd's first binary. Needed by upgrade, and only with it.",
        parse=_upgrade_binary,
    )

    @classmethod
    def build(cls, values, namespace, **context):
        settings = cls(**values)
        try:
            check_commands(settings.schedule, settings.commands)
            check_upgrades(settings.schedule, settings.upgrade_binary)
        except ScheduleError as error:
            raise SettingsError(str(error)) from None
        return settings

    def command(self, name: str) -> tuple[str, ...]:
        """The words of the command ``name``."""
        return dict(self.commands)[name]

    @property
    def changes_membership(self) -> bool:
        """The schedule adds, promotes or removes members: each process's pool follows the membership."""
        return any(disruption.action in MEMBERSHIP_ACTIONS for disruption in self.schedule)

    @property
    def in_proxy(self) -> Disruption | None:
        """The first item that cuts or slows a member's links in the peer proxy (partition, cut, delay): the local
        etcd starts the proxy for it; None when none does."""
        return next((disruption for disruption in self.schedule if ACTIONS[disruption.action].in_proxy), None)

    @property
    def adds_members(self) -> bool:
        """The schedule grows the tool's own etcd (add-learner): the members it adds take load once voting."""
        return any(disruption.action == ADD_LEARNER for disruption in self.schedule)

    @property
    def items(self) -> tuple[str, ...]:
        """The schedule's items in the order the runner does them (by time), as their windows name them."""
        return tuple(disruption.text for disruption in sorted(self.schedule, key=lambda d: d.at))

    @classmethod
    def check_run(cls, settings) -> None:
        """The zone a member added joins needs the local etcd's zones (a cluster of one's own has none here)."""
        zoned = next((d for d in settings.disruptions.schedule if d.action == ADD_LEARNER and d.value), None)
        if zoned is not None and not settings.local_zones and not settings.endpoints:
            raise SettingsError(
                f"--etcd-disrupt: {shown(zoned.text)} puts the new member in zone {zoned.value}, and the local etcd "
                f"has no zones; give --etcd-local-zones (e.g. {example_zones(settings.local_members)}) or leave out "
                f"={zoned.value}"
            )
