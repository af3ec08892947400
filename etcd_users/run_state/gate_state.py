"""The gates' slot on the run's context: the current (or last) run's results once judged, and the master's workers
lost during it (the run's summary reads both)."""

from __future__ import annotations

from dataclasses import dataclass, field

from etcd_users.judging.sla import Result
from etcd_users.members.lost_workers import LostWorker


@dataclass
class GateState:
    results: list[Result] = field(default_factory=list)
    lost_workers: list[LostWorker] = field(default_factory=list)
