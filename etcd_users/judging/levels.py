"""A load shape's level: one constant-load stretch of its plan, the unit a shape is judged by (pure)."""

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Level:
    """One constant-load stretch of a plan, in seconds from the start of the run."""

    name: str
    start_s: float
    end_s: float
    users: int
    qps: float | None
    """Target QPS, or None for a closed-loop level (users only)."""
    spawn_rate: float
    warmup: bool = False

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
