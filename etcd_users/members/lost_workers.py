"""Workers lost during a run, in words and in the summary's terms. Pure: ``worker_watch`` finds them on the master.

A worker that stops sending heartbeats (killed, frozen, cut off) takes its users with it: the rest of the run is
not the run planned. Each loss is one warning when it is found, one record in ``PREFIX_summary.json``'s
``lost_workers`` and, with ``--etcd-sla``, a failed verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

WORKERS = "workers"  # the verdict's name, beside the --etcd-sla gates


class LostWorker(NamedTuple):
    worker: str  # Locust's client id of the worker
    at: float  # unix seconds of its last heartbeat: when its load went away
    at_s: float  # seconds from the run's start to ``at``
    users: int  # the users it ran then
    run_users: int  # the users of the whole run then, every worker's
    returned_at: float | None = None  # unix seconds of a heartbeat after it was lost (it came back); None: never

    def to_dict(self) -> dict:
        return {
            "worker": self.worker,
            "at": round(self.at, 3),
            "at_s": round(self.at_s, 3),
            "users": self.users,
            "run_users": self.run_users,
            "returned_at": round(self.returned_at, 3) if self.returned_at is not None else None,
        }


def _rate(users: int, user_rate: float) -> str:
    return f"{users * user_rate:g} req/s"


def warning_line(lost: LostWorker, silent_s: float, user_rate: float = 0.0) -> str:
    """The master's warning when a worker is found lost; ``user_rate`` (--etcd-user-rate) gives its share of the
    rate."""
    share = f"{lost.users} of {lost.run_users} users"
    if user_rate > 0:
        share += f", {_rate(lost.users, user_rate)} of {_rate(lost.run_users, user_rate)}"
    return (
        f"worker {lost.worker} lost at {lost.at_s:.0f} s (no heartbeat for {silent_s:.0f} s): its load ({share}) "
        "went with it; the run goes on without it and is not the run planned"
    )


def verdict_text(lost: Sequence[LostWorker], workers: int, user_rate: float = 0.0) -> str:
    """``1 of 2 lost at 10 s (32 users): the run was not the run planned``; ``workers``: those the run had."""
    times = ", ".join(f"{worker.at_s:.0f} s" for worker in lost)
    users = sum(worker.users for worker in lost)
    carried = f"{users} users, {_rate(users, user_rate)}" if user_rate > 0 else f"{users} users"
    return f"{len(lost)} of {max(workers, len(lost))} lost at {times} ({carried}): the run was not the run planned"


def end_line(lost: Sequence[LostWorker], workers: int, user_rate: float = 0.0) -> str:
    """The line printed at the end of a run without gates, where a pipeline's log ends."""
    return f"WARNING {WORKERS}: {verdict_text(lost, workers, user_rate)}"
