"""The disruption actions of ``--etcd-disrupt``, one entry each: what the grammar (``disruption_schedule``), the
option's help, the runner and the documentation read. An action added here is parsed, described and run; one
without a function fails ``tests/unit/test_disrupt_schedule.py``.

Pure, and a leaf: each action's function is named ``"module:function"`` and imported only by the runner (``load``),
so that the settings layer, which reads this table for the grammar and the help, never loads gRPC or gevent.
"""

import importlib
from collections.abc import Callable
from dataclasses import dataclass

LEADER, FOLLOWER, ALL = "leader", "follower", "all"
ROLES = (LEADER, FOLLOWER, ALL)
URL = "URL"  # a client URL among the endpoints
COMMAND = "NAME"  # a command's name, defined by --etcd-disrupt-command NAME=COMMAND
ARROW = "->"  # between the two members of an action from one member to another (cut:A->B)
NONE, OPTIONAL, REQUIRED = "none", "optional", "required"  # whether an action takes +DURATION

_ACTIONS_MODULE = "etcd_users.features.disruptions.actions"
_UPGRADE_MODULE = "etcd_users.features.disruptions.upgrade"
_REPLACE_MODULE = "etcd_users.features.disruptions.replace"
_PARTITION_MODULE = "etcd_users.features.disruptions.partition"
_MEMBERSHIP_MODULE = "etcd_users.features.disruptions.membership"
UPGRADE_FLAG = "--etcd-upgrade-binary"
ADD_LEARNER = "add-learner"
# the actions after which each process's pool follows the membership (``transport.membership``)
MEMBERSHIP_ACTIONS = (ADD_LEARNER, "promote", "remove")
ALLOWED_FLAG = "--etcd-disrupt-allowed"


@dataclass(frozen=True)
class Value:
    """What an action's ``=VALUE`` is (the grammar holds each name's parser): its name in the forms, what it means,
    whether the action needs it, and where it is written: after the action's name (``compact=KEEP@TIME``), or ``last``,
    at the item's end (``delay:MEMBER@TIME+DURATION=RTT``)."""

    name: str
    means: str
    required: bool = False
    last: bool = False


KEEP = Value("KEEP", "the revisions to keep, a whole number")
ZONE = Value("ZONE", "a zone's name of --etcd-local-zones, in letters, digits, '-' or '_'")
RTT = Value(
    "RTT",
    "a round trip above zero as --etcd-local-peer-rtt takes it (up to 10s, a jitter at most the round trip), e.g. 40ms "
    "or 40ms±10ms",
    required=True,
    last=True,
)


@dataclass(frozen=True)
class Action:
    name: str
    members: tuple[str, ...]  # the members it may name, its default first; none: it acts on the whole cluster
    duration: str  # +DURATION: NONE, OPTIONAL or REQUIRED
    local_only: bool  # it acts on a member's process or its peer links: only on the local etcd the tool started
    # "module:function": a coroutine (pool, disruption, done) on the master's connections, for a local-only action
    # a function (cluster, statuses, disruption, done) that signals the member's process, and for an outside one a
    # function (command, endpoints, disruption, done) that runs the command
    function: str
    help: str  # what it does, in one line
    value: Value | None = None  # what its =VALUE is, if it takes one
    outside: bool = False  # it acts outside the tool (a command of the user's): only with --etcd-disrupt-allowed
    lasts_s: float = 0.0  # how long it may take without a DURATION: the data kept for its cost covers that much
    # an action that calls etcd's Cluster API from its greenlet: its function takes ``call`` after ``done``, the
    # master's own connections (``Probe.run``); one that acts anywhere is a function (statuses, disruption, done, call)
    calls_etcd: bool = False
    # what a local-only action does that needs the local etcd, as its refusal on --etcd-endpoints says
    needs_local: str = "signals a member's process"
    # what it does in the peer proxy (the local etcd starts the proxy for it); empty: it needs no proxy
    in_proxy: str = ""
    # it acts from one member on another, both named (``cut:A->B``), each as ``members`` allows; no default
    between: bool = False

    @property
    def form(self) -> str:
        """How the action is written with its value: ``compact[=KEEP]``, ``delay:MEMBER@TIME+DURATION=RTT``."""
        if self.between:
            return f"{self.name}:A{ARROW}B@TIME+DURATION"
        if self.value is None:
            return self.name
        if self.value.last:
            return f"{self.name}:MEMBER@TIME+DURATION={self.value.name}"
        return f"{self.name}={self.value.name}" if self.value.required else f"{self.name}[={self.value.name}]"

    @property
    def default_member(self) -> str:
        return self.members[0] if self.members and self.members[0] != COMMAND and not self.between else ""

    @property
    def names_command(self) -> bool:
        """Its ':' part names a command of --etcd-disrupt-command, not a member."""
        return COMMAND in self.members

    def load(self) -> Callable:
        """The action's function, imported (the runner's side: it loads gRPC and Locust)."""
        module, _, name = self.function.partition(":")
        return getattr(importlib.import_module(module), name)


ACTIONS: dict[str, Action] = {
    action.name: action
    for action in (
        Action(
            "defrag",
            (LEADER, FOLLOWER, ALL, URL),
            NONE,
            False,
            f"{_ACTIONS_MODULE}:defrag",
            "Defragment on the member; `all`: each member in turn",
        ),
        Action(
            "move-leader",
            (FOLLOWER, URL),
            NONE,
            False,
            f"{_ACTIONS_MODULE}:move_leader",
            "MoveLeader from the current leader to that member (any follower by default)",
        ),
        Action(
            "snapshot",
            (LEADER, FOLLOWER, URL),
            NONE,
            False,
            f"{_ACTIONS_MODULE}:snapshot",
            "streams the member's whole db (Snapshot), counts the bytes and drops them",
        ),
        Action(
            "compact",
            (),
            NONE,
            False,
            f"{_ACTIONS_MODULE}:compact",
            "Compact at the current revision minus KEEP revisions (0: all history), physically",
            value=KEEP,
        ),
        Action(
            "kill",
            (LEADER, FOLLOWER, URL),
            REQUIRED,
            True,
            f"{_ACTIONS_MODULE}:signal_member",
            "SIGKILL, started again after DURATION",
        ),
        Action(
            "restart",
            (LEADER, FOLLOWER, URL),
            OPTIONAL,
            True,
            f"{_ACTIONS_MODULE}:signal_member",
            "SIGTERM, started again after DURATION (at once without one)",
        ),
        Action(
            "freeze",
            (LEADER, FOLLOWER, URL),
            REQUIRED,
            True,
            f"{_ACTIONS_MODULE}:signal_member",
            "SIGSTOP, SIGCONT after DURATION",
        ),
        Action(
            "partition",
            (LEADER, FOLLOWER, URL),
            REQUIRED,
            True,
            f"{_PARTITION_MODULE}:partition",
            "cuts the member's peer links (in the peer proxy, which the local etcd starts for it: connections to and "
            "from it closed, new ones refused), healed after DURATION; the window tells the leader before, the one "
            "elected during the cut and when, and the one after",
            calls_etcd=True,
            needs_local="cuts a member's links in the peer proxy",
            in_proxy="cuts a member's peer links",
        ),
        Action(
            "cut",
            (LEADER, FOLLOWER, URL),
            REQUIRED,
            True,
            f"{_PARTITION_MODULE}:cut",
            "one way: what member A sends member B is dropped and what B sends A passes (in the peer proxy, the "
            "connections kept open), mended after DURATION (the connections that lost bytes closed, the members dial "
            "again); B is another member than A (`follower`: a follower other than A); the window tells the leader "
            "before, during and after",
            calls_etcd=True,
            needs_local="cuts a member's links in the peer proxy",
            in_proxy="cuts a member's messages to another",
            between=True,
        ),
        Action(
            "delay",
            (FOLLOWER, LEADER, URL),
            REQUIRED,
            True,
            f"{_PARTITION_MODULE}:delay",
            "adds RTT to the round trip between the member and each of its peers (in the peer proxy: half of it each "
            "way, on top of `--etcd-local-peer-rtt`'s and the zones'), removed after DURATION; the window tells the "
            "leader before, during and after",
            value=RTT,
            calls_etcd=True,
            needs_local="delays a member's links in the peer proxy",
            in_proxy="delays a member's peer links",
        ),
        Action(
            "upgrade",
            (ALL, LEADER, FOLLOWER, URL),
            NONE,
            True,
            f"{_UPGRADE_MODULE}:upgrade",
            f"restarts the member on its data dir on `{UPGRADE_FLAG}`; `all`: each in turn, followers first, each "
            "healthy and caught up before the next",
            lasts_s=60.0,
        ),
        Action(
            "rollback",
            (ALL, LEADER, FOLLOWER, URL),
            NONE,
            True,
            f"{_UPGRADE_MODULE}:rollback",
            "restarts an upgraded member on the etcd the cluster started with; when etcd refuses (the cluster version "
            "is the new one), the window fails with etcd's reason and the member is started again on the binary it ran",
            lasts_s=60.0,
        ),
        Action(
            "replace",
            (FOLLOWER, LEADER, URL),
            NONE,
            True,
            f"{_REPLACE_MODULE}:replace",
            "a disk failure: SIGKILL, MemberRemove, data dir wiped, MemberAdd as a learner on the same URLs, started, "
            "caught up, MemberPromote; the window fails with etcd's reason when it refuses",
            lasts_s=60.0,
            calls_etcd=True,
        ),
        Action(
            ADD_LEARNER,
            (),
            NONE,
            True,
            f"{_MEMBERSHIP_MODULE}:add_learner",
            "a new member: its ports and data dir made, MemberAdd as a learner, started, caught up (the bytes it "
            "received from its peers); the pool gives it load once promoted; with `--etcd-local-zones` it joins ZONE "
            "(by default the zone with the fewest members); a learner still there when the run stops is removed",
            value=ZONE,
            lasts_s=60.0,
            calls_etcd=True,
            needs_local="starts a new member",
        ),
        Action(
            "promote",
            (),
            NONE,
            False,
            f"{_MEMBERSHIP_MODULE}:promote",
            "MemberPromote of the cluster's learner, retried while etcd says it is not in sync with its leader",
            lasts_s=20.0,
            calls_etcd=True,
        ),
        Action(
            "remove",
            (FOLLOWER, LEADER, URL),
            NONE,
            False,
            f"{_MEMBERSHIP_MODULE}:remove",
            "MemberRemove of the member (it stops by itself); the pool gives it no more load",
            lasts_s=20.0,
            calls_etcd=True,
        ),
        Action(
            "exec",
            (COMMAND,),
            OPTIONAL,
            False,
            "etcd_users.features.disruptions.command:run_command",
            "runs the command NAME given by `--etcd-disrupt-command NAME=COMMAND` (always with "
            "`--etcd-disrupt-allowed`); DURATION: its timeout; a non-zero exit fails the window",
            outside=True,
        ),
    )
}


def names(local_only: bool | None = None, outside: bool | None = None) -> list[str]:
    """The actions' names in the table's order; ``local_only`` (``outside``) True or False: only those that do, or do
    not, signal a member's process (run a command of the user's)."""
    return [
        name
        for name, action in ACTIONS.items()
        if (local_only is None or action.local_only == local_only) and (outside is None or action.outside == outside)
    ]


def with_duration() -> list[str]:
    """The actions that take a +DURATION."""
    return [name for name, action in ACTIONS.items() if action.duration != NONE]


def said(items: list[str], last: str = "or") -> str:
    """``a, b or c`` (``last``: the word before the last item)."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def help_text() -> str:
    """The actions as the option's help lists them."""
    anywhere = ", ".join(ACTIONS[name].form for name in names(local_only=False, outside=False))
    local = ", ".join(ACTIONS[name].form for name in names(local_only=True))
    outside = ", ".join(f"{name}:NAME" for name in names(outside=True))
    return (
        f"{anywhere}, on the local etcd only {local}, and anywhere with "
        f"{ALLOWED_FLAG} {outside} (a command of --etcd-disrupt-command)"
    )


def markdown_table() -> str:
    """The actions as the documentation's table (docs/disruptions.md holds it as printed here)."""
    lines = [
        "| action | members (default first) | `+DURATION` | local etcd only | what it does |",
        "|---|---|---|---|---|",
    ]
    for action in ACTIONS.values():
        form = f"`{action.name}`"
        if action.value is not None:
            form = f"`{action.form}`" if action.value.required else f"{form} or `{action.name}={action.value.name}`"
        if action.between:
            form = f"`{action.name}:A{ARROW}B`"
        members = ", ".join(action.members) if action.members else "none (cluster-wide)"
        if action.names_command:
            members = "NAME (a command, required)"
        if action.between:
            members = f"A and B (required): {said(list(action.members))} each"
        local = "yes" if action.local_only else "no"
        lines.append(f"| {form} | {members} | {action.duration} | {local} | {action.help} |")
    return "\n".join(lines) + "\n"
