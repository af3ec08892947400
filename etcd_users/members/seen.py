"""The members as the monitoring found them, its slot on the run's context for the other features (the run's
summary, the gates, the web UI, a shape's live verdicts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from etcd_users.members.preflight import MemberReport


class SpaceAlarm(Protocol):
    """What the others read of the monitoring's watch on the db against its quota (``monitoring.space.SpaceWatch``)."""

    @property
    def alarm(self) -> str | None: ...


def _no_breach(why: str) -> None:
    """``on_breach`` without the members' monitoring: a breach sets nothing off."""


@dataclass
class MembersSeen:
    preflight: list[MemberReport] = field(default_factory=list)  # the members as the pre-flight found them
    # the current (or last) run's rows of the members' /metrics, kept past the run's stop for the gates and the
    # summary; None when the run polled none (--etcd-metrics-interval 0)
    member_rows: list[dict] | None = None
    space_watch: SpaceAlarm | None = None  # the current (or last) run's db against quota and alarms
    # the members' during the current run, where it is judged: the monitoring's own (``monitoring.during_run``)
    monitoring: Any = None
    # a gate failed during the run (a shape's live judging): the members' side, once per run
    on_breach: Callable[[str], None] = _no_breach

    @property
    def alarm(self) -> str | None:
        """etcd's NOSPACE alarm as the current (or last) run knows it, in one short line; None without one."""
        return self.space_watch.alarm if self.space_watch is not None else None
