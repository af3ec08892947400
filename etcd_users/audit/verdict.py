"""The audit's verdict from its parts: the members' hashes and each process's keys and watch streams read back.

It fails on evidence only: hashes that differ at one revision and compact revision, an acknowledged write lost, a
watcher's events out of order or missed. What could not be checked (a member that did not answer, a process that
sent no counts) is said, and does not fail the run. A failed audit exits with ``AUDIT_EXIT_CODE``. Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from etcd_users.audit.ledger import KeyCounts
from etcd_users.audit.watch_counts import WatchCounts
from etcd_users.exit_code import AUDIT_EXIT_CODE


@dataclass(frozen=True)
class MemberHash:
    member: str  # host:port
    hash: int | None
    compact_revision: int
    error: str | None = None


@dataclass(frozen=True)
class Hashes:
    revision: int
    members: tuple[MemberHash, ...]

    @property
    def answered(self) -> tuple[MemberHash, ...]:
        return tuple(member for member in self.members if member.error is None)

    @property
    def comparable(self) -> bool:
        """All members answered with the same compact revision."""
        answered = self.answered
        return len(answered) == len(self.members) and len({m.compact_revision for m in answered}) == 1

    @property
    def equal(self) -> bool:
        return self.comparable and len({member.hash for member in self.members}) == 1


@dataclass
class ProcessAudit:
    """One process's keys read back and its watch streams' counts."""

    process: str  # "local", or a worker's id
    keys: KeyCounts = field(default_factory=KeyCounts)
    watches: WatchCounts = field(default_factory=WatchCounts)
    revision: int = 0  # where its keys were read back
    seconds: float = 0.0  # the read back and its arithmetic
    bytes_per_key: float = 0.0  # the ledger's memory per key
    error: str | None = None  # why its keys could not be read back

    def to_report(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_report(cls, data: dict[str, Any]) -> ProcessAudit:
        return cls(
            **{**data, "keys": KeyCounts(**data.get("keys", {})), "watches": WatchCounts(**data.get("watches", {}))}
        )


@dataclass
class Audit:
    processes: list[ProcessAudit]
    hashes: Hashes | None = None
    hash_error: str | None = None  # why the members could not be hashed
    missing: int = 0  # processes that ran users but sent no counts

    @property
    def writes(self) -> int:
        return sum(p.keys.writes for p in self.processes)

    @property
    def lost(self) -> int:
        """Keys older than an acknowledged write, and keys gone that no process of the run deleted."""
        lost = 0
        for process in self.processes:
            others_delete = any(
                other.keys.deletes or other.keys.untracked_deletes for other in self.processes if other is not process
            )
            lost += process.keys.stale if others_delete else process.keys.lost
        return lost

    @property
    def unexplained(self) -> int:
        """Keys gone that a delete of another process of the run, or one of unknown outcome, may have removed: not
        counted as lost."""
        return sum(p.keys.vanished + p.keys.stale + p.keys.doubtful for p in self.processes) - self.lost

    @property
    def watches(self) -> WatchCounts:
        total = WatchCounts()
        for process in self.processes:
            total.add(process.watches)
        return total

    @property
    def hashes_differ(self) -> bool:
        return self.hashes is not None and self.hashes.comparable and not self.hashes.equal

    @property
    def failed(self) -> bool:
        watches = self.watches
        return self.hashes_differ or self.lost > 0 or watches.disordered > 0 or watches.missed > 0

    def line(self) -> str:
        """One line: ``audit: 3 members' HashKV equal at rev 1204551; 1,183,204 acknowledged writes, 0 lost; …``."""
        parts = [self._hash_part(), f"{self.writes:,} acknowledged writes, {self.lost:,} lost"]
        if self.unexplained:
            parts[-1] += f" ({self.unexplained:,} gone after deletes of other processes or of unknown outcome)"
        watches = self.watches
        if watches.watchers:
            part = f"{watches.in_order:,} watch events in order, {watches.missed:,} missed"
            if watches.disordered:
                part += f", {watches.disordered:,} out of order or repeated"
            if watches.broken:
                part += f" ({watches.broken:,} streams ended early, not judged)"
            parts.append(part)
        errors = [f"{p.process}: {p.error}" for p in self.processes if p.error]
        if self.missing:
            errors.append(f"{self.missing} process{'es' * (self.missing > 1)} sent no counts")
        if errors:
            parts.append("not read back: " + "; ".join(errors))
        return ("audit FAILED: " if self.failed else "audit: ") + "; ".join(parts)

    def _hash_part(self) -> str:
        hashes = self.hashes
        if hashes is None or not hashes.members:
            return f"HashKV not compared ({self.hash_error or 'no member'})"
        members = len(hashes.members)
        whose = f"{members} members'" if members > 1 else "1 member's"
        if hashes.equal:
            return f"{whose} HashKV equal at rev {hashes.revision}"
        if self.hashes_differ:
            return f"{whose} HashKV DIFFER at rev {hashes.revision}"
        return f"{whose} HashKV not compared at rev {hashes.revision} ({_why_not_comparable(hashes)})"

    def error_lines(self) -> list[str]:
        """The evidence of a failure, a line each: the members and their hashes, the keys lost."""
        lines = []
        if self.hashes_differ:
            members = ", ".join(f"{m.member} {m.hash:#010x}" for m in self.hashes.members)
            lines.append(
                f"audit: HashKV differs at rev {self.hashes.revision} "
                f"(compact rev {self.hashes.members[0].compact_revision}): {members}"
            )
        if self.lost:
            stale = sum(p.keys.stale for p in self.processes)
            lines.append(
                f"audit: {self.lost:,} acknowledged writes lost: {stale:,} keys older than the write etcd "
                f"acknowledged, {self.lost - stale:,} keys gone that no process of the run deleted"
            )
        watches = self.watches
        if watches.disordered or watches.missed:
            lines.append(
                f"audit: watch streams: {watches.disordered:,} events out of order or repeated, {watches.missed:,} "
                f"acknowledged puts not delivered to a watcher (of {watches.watchers:,} watchers)"
            )
        return lines

    def as_json(self) -> dict[str, Any]:
        hashes = self.hashes
        return {
            "passed": not self.failed,
            "line": self.line(),
            "errors": self.error_lines(),
            "exit_code": AUDIT_EXIT_CODE if self.failed else 0,
            "hashkv": {
                "revision": hashes.revision if hashes else None,
                "equal": hashes.equal if hashes else None,
                "comparable": hashes.comparable if hashes else False,
                "members": [asdict(member) for member in hashes.members] if hashes else [],
                "error": self.hash_error,
            },
            "writes": {"acknowledged": self.writes, "lost": self.lost, "unexplained": self.unexplained},
            "watches": asdict(self.watches),
            "processes": [process.to_report() for process in self.processes],
            "missing_processes": self.missing,
        }


def _why_not_comparable(hashes: Hashes) -> str:
    silent = [member for member in hashes.members if member.error is not None]
    if silent:
        return "; ".join(f"{member.member}: {member.error}" for member in silent)
    return "compact revisions differ: " + ", ".join(f"{m.member} {m.compact_revision}" for m in hashes.members)
