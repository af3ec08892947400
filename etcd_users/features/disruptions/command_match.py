"""The grammar of ``--etcd-disrupt-command NAME=COMMAND`` (given once per command) and its match with the schedule:
every exec names a command defined, every command defined is used. Pure: no Locust, no gRPC.

A command is split like a shell's words (``shlex``) and run without a shell: ``sh -c '…'`` when it needs one.
"""

from __future__ import annotations

import shlex

from etcd_users.core.arguments import shown
from etcd_users.features.disruptions.schedule import COMMAND_FLAG, COMMAND_NAME, FLAG, Disruption, ScheduleError
from etcd_users.target.action_table import ACTIONS

FORM = "NAME=COMMAND (e.g. 'drain=kubectl drain node-1 --ignore-daemonsets'), once per command"


def parse_commands(flag: str, values: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each ``NAME=COMMAND`` as its name and its words, in the order given; ``ScheduleError`` in one line."""
    commands: dict[str, tuple[str, ...]] = {}
    for value in values:
        name, equals, command = value.partition("=")
        name = name.strip()
        if not equals or not COMMAND_NAME.match(name):
            raise ScheduleError(f"{flag}: {shown(value)} has no NAME= before its command; expected {FORM}")
        if name in commands:
            raise ScheduleError(f"{flag}: {name} is defined twice; give each command a name of its own")
        try:
            words = tuple(shlex.split(command))
        except ValueError as error:
            raise ScheduleError(f"{flag}: {shown(value)} is not a command a shell could split ({error})") from None
        if not words:
            raise ScheduleError(f"{flag}: {shown(value)} has an empty command; expected {FORM}")
        commands[name] = words
    return tuple(commands.items())


def check_commands(schedule: tuple[Disruption, ...], commands: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Every exec of the schedule names a command defined, and every command defined is run by one."""
    defined = [name for name, _words in commands]
    used = {d.member for d in schedule if ACTIONS[d.action].names_command}
    for disruption in schedule:
        if ACTIONS[disruption.action].names_command and disruption.member not in defined:
            known = f"the commands defined: {', '.join(defined)}" if defined else "none is defined"
            raise ScheduleError(
                f"{FLAG}: {shown(disruption.text)} names the command {disruption.member!r}, and {known}; add "
                f"{COMMAND_FLAG} '{disruption.member}=COMMAND'"
            )
    unused = [name for name in defined if name not in used]
    if unused:
        raise ScheduleError(
            f"{COMMAND_FLAG}: {unused[0]} is never run; run it with {FLAG} 'exec:{unused[0]}@TIME' or leave it out"
        )
