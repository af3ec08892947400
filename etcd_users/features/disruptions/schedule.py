"""The grammar of ``--etcd-disrupt``: what to do to the cluster, to which member, and when. Pure: no Locust, no gRPC.

A schedule is comma-separated items ``ACTION[=KEEP][:MEMBER]@TIME[+DURATION][=RTT]``, an action's ``=VALUE`` where
its entry's ``Value`` says (compact's KEEP after its name, delay's RTT at the end); TIME counts from the run's start
(Locust's test start), DURATION from the action's. Times are ``120s``, ``2m``, ``1.5s``, ``1h`` or a plain number
of seconds. Every item is checked here, each refusal one line that quotes the item and shows the expected form;
whether the actions may touch the endpoints at all (``check_allowed``) depends on who started them. The actions, the
members each may name and whether it takes a duration or a value are ``disruption_actions``'s; each value's parser is
here (``_VALUES``).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from etcd_users.core.arguments import shown
from etcd_users.settings.network import ZONE_NAME
from etcd_users.settings.round_trip import PeerRtt, parse_round_trip
from etcd_users.target.action_table import (
    ACTIONS,
    ALLOWED_FLAG,
    ARROW,
    FOLLOWER,
    KEEP,
    NONE,
    REQUIRED,
    ROLES,
    RTT,
    UPGRADE_FLAG,
    URL,
    ZONE,
    Value,
    names,
    said,
    with_duration,
)

FLAG = "--etcd-disrupt"
COMMAND_FLAG = "--etcd-disrupt-command"

EXAMPLE = "defrag:leader@120s,move-leader@300s,snapshot@400s,compact=1000@450s,kill:follower@500s+30s"
FORM = "ACTION[:MEMBER]@TIME[+DURATION] (e.g. defrag:leader@120s, kill:follower@500s+30s, compact=1000@60s)"

_ITEM = re.compile(
    r"""^(?P<action>[a-z-]+)
        (?:=(?P<value>[^:@]*))?
        (?::(?P<member>[^@]+))?
        @(?P<at>[^+=]*)
        (?:\+(?P<duration>[^=]*))?
        (?:=(?P<last>.*))?$""",
    re.VERBOSE,
)
_TIME = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>s|m|h)?$")
_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_URL = re.compile(r"^https?://[^/\s:]+:[0-9]+/?$")
COMMAND_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class ScheduleError(ValueError):
    """An item of the schedule, or the schedule against the endpoints, refused in one line that names the option."""


class Disruption(NamedTuple):
    """One item of the schedule. ``member``: leader, follower, all or a client URL ('' for compact), for exec the
    command's name, for an action between two members both, ``A->B`` (``members_named``); ``duration``: seconds until
    the member is started again or thawed, for exec the command's timeout (0: none); ``value``: its ``=VALUE`` as
    parsed, compact's revisions to keep (an int), delay's round trip (a ``PeerRtt``), add-learner's zone (a str), None
    when not given."""

    action: str
    member: str
    at: float
    duration: float = 0.0
    value: int | PeerRtt | str | None = None

    @property
    def members_named(self) -> tuple[str, ...]:
        """The members the item names: one, or the two of ``A->B``; none for an action on the whole cluster."""
        if not self.member:
            return ()
        return tuple(self.member.split(ARROW)) if ACTIONS[self.action].between else (self.member,)

    @property
    def keep(self) -> int:
        """The revisions a compaction keeps (0: none)."""
        return self.value if isinstance(self.value, int) else 0

    @property
    def text(self) -> str:
        """The item as written in the schedule's canonical form."""
        last = ACTIONS[self.action].value is not None and ACTIONS[self.action].value.last
        value = "" if self.value is None else f"={self.value}"
        member = f":{self.member}" if self.member else ""
        duration = f"+{self.duration:g}s" if self.duration else ""
        if last:
            return f"{self.action}{member}@{self.at:g}s{duration}{value}"
        return f"{self.action}{value}{member}@{self.at:g}s{duration}"


def _refuse(item: str, why: str) -> ScheduleError:
    return ScheduleError(f"{FLAG}: {shown(item)} {why}; expected {FORM}")


def parse_seconds(text: str) -> float | None:
    """``120s``, ``2m``, ``1.5s``, ``1h`` or a plain number of seconds; None when the text is none of these."""
    match = _TIME.match(text.strip())
    if match is None:
        return None
    value = float(match["number"]) * _UNITS[match["unit"]]
    return value if math.isfinite(value) else None


def _keep(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _rtt(text: str) -> PeerRtt | None:
    try:
        rtt = parse_round_trip(text)
    except ValueError:
        return None
    return rtt if rtt.rtt_ms > 0 else None


def _zone(text: str) -> str | None:
    return text if ZONE_NAME.fullmatch(text) else None


# each value's parser: its value, or None when the text is not one
_VALUES = {KEEP.name: _keep, RTT.name: _rtt, ZONE.name: _zone}


def _value_form(name: str, value: Value) -> str:
    return ACTIONS[name].form.replace("[", "").replace("]", "") + f" ({value.means})"


def _value(item: str, match: re.Match) -> int | PeerRtt | str | None:
    """The item's ``=VALUE``, parsed, where its action takes one."""
    action = ACTIONS[match["action"]]
    first, last = match["value"], match["last"]
    if action.value is None:
        if first is None and last is None:
            return None
        forms = [_value_form(name, each.value) for name, each in ACTIONS.items() if each.value is not None]
        raise _refuse(item, f"has '=' where only {said(forms)} may")
    given, misplaced = (last, first) if action.value.last else (first, last)
    if misplaced is not None:
        where = action.form if action.value.last else f"{action.name}={action.value.name}@TIME"
        raise _refuse(item, f"has its ={action.value.name} in the wrong place; write {where}")
    if given is None:
        if action.value.required:
            raise _refuse(item, f"has no ={action.value.name}: {action.name} needs {action.value.means}")
        return None
    parsed = _VALUES[action.value.name](given.strip())
    if parsed is None:
        raise _refuse(item, f"has no {action.value.name} after '=': {action.value.means}")
    return parsed


def _member(item: str, action: str, member: str) -> str:
    """A member the item names, as its action allows: a role, or a client URL (without its last '/')."""
    members = ACTIONS[action].members
    if member not in members and not (URL in members and _URL.match(member)):
        named = ", ".join("a client URL http(s)://HOST:PORT" if m == URL else m for m in members)
        raise _refuse(item, f"names member {member!r}; {action} takes {named}")
    return member.rstrip("/")


def _between(item: str, action: str, text: str | None) -> str:
    """``A->B``: the two members of an action from one member to another, each checked, never the same one twice."""
    sides = [side.strip() for side in (text or "").split(ARROW)]
    if len(sides) != 2 or not all(sides):
        raise _refuse(
            item,
            f"names no two members: {action} goes from one member to another, {ACTIONS[action].form}, e.g. "
            f"{action}:leader{ARROW}follower@60s+10s",
        )
    source, target = (_member(item, action, side) for side in sides)
    if source == target and source != FOLLOWER:  # two followers are two different members
        raise _refuse(item, f"names {source} on both sides; {action} goes from one member to another")
    return f"{source}{ARROW}{target}"


def parse_item(item: str) -> Disruption:
    """One ``ACTION[=KEEP][:MEMBER]@TIME[+DURATION][=RTT]``, checked; ``ScheduleError`` in one line when it is not."""
    text = item.strip()
    match = _ITEM.match(text)
    if match is None:
        raise _refuse(item, "is not an item of the schedule")
    action = match["action"]
    if action not in ACTIONS:
        raise _refuse(item, f"has an unknown action {action!r} (one of {', '.join(ACTIONS)})")
    members, takes_duration = ACTIONS[action].members, ACTIONS[action].duration
    if ACTIONS[action].value is None:  # a stray '=' is refused before anything else of the item
        _value(item, match)
    member = ACTIONS[action].default_member
    if ACTIONS[action].names_command:
        member = (match["member"] or "").strip()
        if not COMMAND_NAME.match(member):
            raise _refuse(
                item,
                f"names no command: {action} takes the NAME of a {COMMAND_FLAG} NAME=COMMAND "
                "(letters, digits, '.', '_' or '-'), e.g. exec:drain@60s+120s",
            )
    elif ACTIONS[action].between:
        member = _between(item, action, match["member"])
    elif match["member"] is not None:
        member = match["member"].strip()
        if not members:
            raise _refuse(item, f"names a member, but {action} acts on the whole cluster")
        member = _member(item, action, member)
    at = parse_seconds(match["at"])
    if at is None:
        raise _refuse(item, "has no time after '@' such as 120s, 2m or 1.5s (seconds from the run's start)")
    duration = 0.0
    if match["duration"] is not None:
        if takes_duration == NONE:
            raise _refuse(item, f"has a +DURATION, which {action} does not take (only {said(with_duration(), 'and')})")
        duration = parse_seconds(match["duration"])
        if duration is None or duration <= 0:
            raise _refuse(item, "has no duration after '+' such as 30s or 1.5s (above zero)")
    elif takes_duration == REQUIRED:
        raise _refuse(item, f"has no +DURATION: {action} needs how long until the member is back, e.g. +30s")
    return Disruption(action, member, at, duration, _value(item, match))


def parse_schedule(flag: str, text: str) -> tuple[Disruption, ...]:
    """The whole option: its items in the order given (the runner orders them by time); empty text, none."""
    if not text.strip():
        return ()
    items = text.split(",")
    for item in items:
        if not item.strip():
            raise ScheduleError(
                f"{flag}: {shown(text)} has an empty item; separate items by single commas, e.g. {EXAMPLE}"
            )
    return tuple(parse_item(item) for item in items)


def check_allowed(schedule: tuple[Disruption, ...], endpoints: list[str], local: bool, allowed: bool) -> None:
    """The schedule against the run's endpoints: members named by URL are among them; on endpoints the tool did not
    start, signals are refused and any other action needs ``--etcd-disrupt-allowed``, which a command (exec) always
    needs."""
    urls = [url.rstrip("/") for url in endpoints]
    commands = [d.text for d in schedule if ACTIONS[d.action].outside]
    if commands and not allowed:
        raise ScheduleError(
            f"{FLAG}: {shown(commands[0])} runs a command of your own, outside the tool; pass {ALLOWED_FLAG} to let "
            "it run (on any cluster, the local etcd too)"
        )
    for disruption in schedule:
        if ACTIONS[disruption.action].names_command:
            continue
        for member in disruption.members_named:
            if member not in ROLES and member not in urls:
                raise ScheduleError(
                    f"{FLAG}: {shown(disruption.text)} names {member}, which is not among the endpoints "
                    f"({', '.join(urls)}); name one of them, or leader or follower"
                )
        removes = {"replace": "removes a member and adds it back", "remove": "removes a member"}
        if disruption.action in removes and local and len(urls) == 1:  # etcd never removes its only member
            raise ScheduleError(
                f"{FLAG}: {shown(disruption.text)} {removes[disruption.action]}, and the cluster has one member; use "
                "--etcd-local-members 3"
            )
        if FOLLOWER in disruption.members_named and len(urls) == 1:
            raise ScheduleError(
                f"{FLAG}: {shown(disruption.text)} needs a follower, and the cluster has one member; use "
                "--etcd-local-members 3 or give all members in --etcd-endpoints"
            )
    if local or not schedule:
        return
    local_only = [d for d in schedule if ACTIONS[d.action].local_only]
    if local_only:
        others = said(names(local_only=False, outside=False))
        raise ScheduleError(
            f"{FLAG}: {shown(local_only[0].text)} {ACTIONS[local_only[0].action].needs_local}, which only the local "
            f"etcd the tool starts allows; leave out --etcd-endpoints for a local cluster, or use {others}"
        )
    if not allowed:
        raise ScheduleError(
            f"{FLAG}: the endpoints given are not the tool's own etcd; pass {ALLOWED_FLAG} to disrupt them "
            f"({schedule[0].text} first)"
        )


def check_upgrades(schedule: tuple[Disruption, ...], upgrade_binary: str) -> None:
    """An upgrade needs ``--etcd-upgrade-binary``, which is given only for one; a rollback comes after an upgrade."""
    upgrades = [d for d in schedule if d.action == "upgrade"]
    if upgrades and not upgrade_binary.strip():
        raise ScheduleError(
            f"{FLAG}: {shown(upgrades[0].text)} upgrades members to {UPGRADE_FLAG}, which is not given; add "
            f"{UPGRADE_FLAG} PATH|VERSION (e.g. {UPGRADE_FLAG} 3.5)"
        )
    if upgrade_binary.strip() and not upgrades:
        raise ScheduleError(
            f"{UPGRADE_FLAG}: {shown(upgrade_binary.strip())} is never used; upgrade members to it with {FLAG} "
            "'upgrade:all@TIME' or leave it out"
        )
    for disruption in schedule:
        if disruption.action == "rollback" and not any(u.at < disruption.at for u in upgrades):
            raise ScheduleError(
                f"{FLAG}: {shown(disruption.text)} rolls back an upgrade, and no upgrade comes before it; schedule "
                "one earlier, e.g. upgrade:follower@TIME"
            )
