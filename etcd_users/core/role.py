"""The part a process plays in a run, decided once from Locust's runner when the run's context is made.

A master spreads the users over its workers and runs none; a worker runs its part of them and sees only that part;
a single process (Locust's local runner) does both. What a process does at each event follows from it: the master
and the single process see the whole run and judge it, the workers and the single process run users.
"""

from locust.runners import MasterRunner, WorkerRunner

import enum


class Role(enum.Enum):
    MASTER = "master"  # --master, or the parent of --processes
    WORKER = "worker"  # --worker, or a child of --processes
    SINGLE = "single"  # a local runner; also a process without a runner (a test's environment)

    @classmethod
    def of(cls, runner) -> "Role":
        if isinstance(runner, MasterRunner):
            return cls.MASTER
        if isinstance(runner, WorkerRunner):
            return cls.WORKER
        return cls.SINGLE

    @property
    def is_master(self) -> bool:
        return self is Role.MASTER

    @property
    def is_worker(self) -> bool:
        return self is Role.WORKER

    @property
    def judges(self) -> bool:
        """A master or single process: it sees the whole run, judges its gates and writes its files."""
        return self is not Role.WORKER

    @property
    def runs_users(self) -> bool:
        """A worker or single process: its users make the requests (and keep the audit's record of them)."""
        return self is not Role.MASTER
