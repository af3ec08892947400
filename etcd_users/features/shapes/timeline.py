"""The timeline of a run: each planned level with what happened to it, one record per level, in plan order.

A level is entered (``started_at``), its users are all running (``running_at``), it ends (``ended_at``, once), and
it may be judged (``verdict``). The failure labels Locust counted from its users all running to its end are its
``errors``, since Locust's own failures file is not split in time. Pure: the caller says when and what Locust counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from etcd_users.features.shapes.plan import Level, level_index_at
from etcd_users.judging.level_verdicts import LevelVerdict

RECORDED_ERRORS = 20
"""The most frequent failure labels kept per level in the record."""

ErrorCounts = dict[tuple[str, str], int]
"""Locust's failures so far by request name and error text."""


@dataclass
class LevelRecord:
    """One level of the plan and what happened to it; None for what has not happened (yet)."""

    level: Level
    started_at: float | None = None
    running_at: float | None = None
    ended_at: float | None = None
    errors: list[dict] | None = None
    verdict: LevelVerdict | None = None
    errors_at_running: ErrorCounts | None = field(default=None, repr=False)
    """Locust's failures when the users were all running: ``errors`` counts from there."""

    def to_dict(self) -> dict:
        """The level as ``PREFIX_shape.json`` holds it."""
        verdict = self.verdict
        return {
            **self.level.to_dict(),
            "started_at": self.started_at,
            "running_at": self.running_at,
            "ended_at": self.ended_at,
            "errors": self.errors,
            "verdict": None if verdict is None else verdict.verdict,
            "checks": self.checks_json(),
        }

    def checks_json(self) -> list[dict]:
        """The checks of the level's verdict as the files hold them; none before it is judged."""
        verdict = self.verdict
        return [] if verdict is None else [check.to_dict() for check in verdict.checks]


class Timeline:
    """The levels of one run as they run, and when the run started and ended."""

    def __init__(self, plan: list[Level] | None = None, started_at: float | None = None) -> None:
        self.levels = [LevelRecord(level) for level in plan or ()]
        self.started_at = started_at
        self.ended_at: float | None = None

    def __len__(self) -> int:
        return len(self.levels)

    def __getitem__(self, index: int) -> LevelRecord:
        return self.levels[index]

    @property
    def plan(self) -> list[Level]:
        return [record.level for record in self.levels]

    def append(self, level: Level) -> None:
        self.levels.append(LevelRecord(level))

    def index_at(self, t: float) -> int | None:
        """The level planned at run time ``t``; None before the start and after the end."""
        return level_index_at(self.plan, t)

    def enter(self, index: int, when: float) -> None:
        self.levels[index].started_at = when

    def mark_running(self, index: int, when: float, errors: ErrorCounts | None) -> None:
        record = self.levels[index]
        record.running_at = when
        record.errors_at_running = errors

    def end(self, index: int, when: float, errors: ErrorCounts | None) -> bool:
        """The level ends, once (False when it had already): its failures counted since its users all ran."""
        record = self.levels[index]
        if record.ended_at is not None:
            return False
        record.ended_at = when
        if record.errors_at_running is not None and errors is not None:
            record.errors = grown_errors(record.errors_at_running, errors)
        return True

    def warmup_end(self) -> float | None:
        """When the measured window starts: entry of the first measured level, else its planned start."""
        first = next((i for i, record in enumerate(self.levels) if not record.level.warmup), None)
        if first in (None, 0) or self.started_at is None:
            return None
        record = self.levels[first]
        return record.started_at if record.started_at is not None else self.started_at + record.level.start_s


def grown_errors(before: ErrorCounts, now: ErrorCounts) -> list[dict]:
    """The failure labels counted between ``before`` and ``now``, most frequent first (at most RECORDED_ERRORS)."""
    grown = [(key, count - before.get(key, 0)) for key, count in now.items() if count > before.get(key, 0)]
    grown.sort(key=lambda item: (-item[1], item[0]))
    return [{"name": name, "error": error, "occurrences": count} for (name, error), count in grown[:RECORDED_ERRORS]]
