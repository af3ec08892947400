"""The audit's verdict from its parts: the members' hashes and each process's keys and watch streams read back.

It fails on evidence: hashes that differ at one revision and compact revision, members that applied the same raft
entries to different revisions (diverged), an acknowledged write lost, a watcher's events out of order or missed, a
linearizable read that did not reflect an acknowledged write. It also fails when it could not be made: a member that
still did not answer after the audit waited for it (etcd 3.5.0–3.5.2 diverge on exactly the member killed), compact
revisions that stay apart, a process whose keys no member would read back: an audit never passes by saying nothing.
A worker that sent no counts (lost: the workers' gate fails the run) and hashes a user without etcd's root role may
not ask for are said, and do not fail the audit. A failed audit exits with ``AUDIT_EXIT_CODE``. Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from etcd_users.audit_trail.ledger import KeyCounts
from etcd_users.audit_trail.reads import ReadCounts, evidence_line
from etcd_users.audit_trail.staleness import Staleness
from etcd_users.core.exit_code import AUDIT_EXIT_CODE
from etcd_users.known_bugs import DATA, WATCH, known_bug_lines, known_bug_names
from etcd_users.transport.watch_counts import WatchCounts

# etcd's answer to a user without the root role (``auth: permission denied``): the hashes cannot be asked for
PERMISSION_DENIED = "permission denied"


@dataclass(frozen=True)
class MemberHash:
    member: str  # host:port
    hash: int | None
    compact_revision: int
    error: str | None = None
    revision: int = 0  # the member's current revision when it was hashed (0: unknown)
    applied_index: int = 0  # its raft applied index then (0: unknown)
    version: str = ""

    def describe(self) -> str:
        """``127.0.0.1:2379 rev 40626 applied 40671 hash 0x1b2c3d4e compact 1``, or its error."""
        if self.error is not None:
            return f"{self.member} {self.error}"
        applied = f" applied {self.applied_index}" if self.applied_index else ""
        return f"{self.member} rev {self.revision}{applied} hash {self.hash:#010x} compact {self.compact_revision}"


@dataclass(frozen=True)
class Hashes:
    revision: int
    members: tuple[MemberHash, ...]
    waited: float = 0.0  # seconds the audit waited for every member to answer at the cluster's raft index

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

    @property
    def compared(self) -> tuple[MemberHash, ...]:
        """The members whose hashes compare: those that answered, when they share one compact revision."""
        answered = self.answered
        return answered if len({m.compact_revision for m in answered}) == 1 else ()

    @property
    def differ(self) -> bool:
        """Hashes that compare and are not all one: the members' data differ."""
        return len({member.hash for member in self.compared}) > 1

    @property
    def diverged(self) -> tuple[MemberHash, ...]:
        """Members that applied the same raft entries as another member to a different revision: one of them skipped
        or repeated an entry. Empty where the members do not send their applied index."""
        by_index: dict[int, set[int]] = {}
        for member in self.answered:
            if member.applied_index:
                by_index.setdefault(member.applied_index, set()).add(member.revision)
        split = {index for index, revisions in by_index.items() if len(revisions) > 1}
        return tuple(member for member in self.answered if member.applied_index in split)

    @property
    def behind(self) -> tuple[MemberHash, ...]:
        """Members at a lower raft applied index than another one, after the time the audit gave them to catch up."""
        indexes = [member.applied_index for member in self.answered if member.applied_index]
        top = max(indexes, default=0)
        return tuple(m for m in self.answered if m.applied_index and m.applied_index < top)

    @property
    def forbidden(self) -> bool:
        """Every member refused the hashes to this user (etcd's root role only)."""
        return bool(self.members) and all(PERMISSION_DENIED in (m.error or "") for m in self.members)

    @property
    def silent(self) -> tuple[MemberHash, ...]:
        """The members that did not answer, after the time the audit waited for them."""
        return tuple(member for member in self.members if member.error is not None)

    def silent_text(self) -> str:
        """``127.0.0.1:2379 down for 30 s: UNAVAILABLE; …`` (``127.0.0.1:2379: UNAVAILABLE`` for a member that went
        silent after the wait)."""
        waited = f" down for {self.waited:.0f} s" if self.waited >= 1 else ""
        return "; ".join(f"{member.member}{waited}: {member.error}" for member in self.silent)

    @property
    def unchecked(self) -> str | None:
        """Why the members' data could not be compared, every member's, or None when they were."""
        if self.forbidden:
            return None
        if len(self.members) > 1 and len(self.compared) < 2:
            return f"not compared at rev {self.revision} ({_why_not_comparable(self)})"
        if len(self.members) == 1 and not self.answered:
            return f"not hashed ({self.members[0].error})"
        if self.silent:  # the others compared, but a divergence can be on exactly the member that did not answer
            return f"not compared: {self.silent_text()}"
        return None


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
    reads: ReadCounts = field(default_factory=ReadCounts)  # its linearizable reads judged
    staleness: dict[str, list[str]] = field(default_factory=dict)  # its serializable reads: Staleness.to_report()

    def to_report(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_report(cls, data: dict[str, Any]) -> ProcessAudit:
        return cls(
            **{
                **data,
                "keys": KeyCounts(**data.get("keys", {})),
                "watches": WatchCounts(**data.get("watches", {})),
                "reads": ReadCounts(**data.get("reads", {})),
            }
        )


@dataclass
class Audit:
    processes: list[ProcessAudit]
    hashes: Hashes | None = None
    hash_error: str | None = None  # why the members could not be hashed
    missing: int = 0  # processes that ran users but sent no counts
    kept: str | None = None  # where the local etcd's data dirs and logs were kept as the failure's evidence
    evidence_files: list[str] = field(default_factory=list)  # the offending keys and each member's view of them
    held_differently: dict | None = None  # with data that differ: the keys the members hold differently (divergence)

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
    def reads(self) -> ReadCounts:
        total = ReadCounts()
        for process in self.processes:
            total.add(process.reads)
        return total

    def staleness(self) -> Staleness:
        """The serializable reads of every process, per member."""
        total = Staleness()
        for process in self.processes:
            total.add(Staleness.from_report(process.staleness).members)
        return total

    @property
    def hashes_differ(self) -> bool:
        return self.hashes is not None and self.hashes.differ

    @property
    def diverged(self) -> tuple[MemberHash, ...]:
        return self.hashes.diverged if self.hashes is not None else ()

    @property
    def unchecked(self) -> list[str]:
        """What the audit could not check, a phrase each: each makes it fail, since nothing was shown to be kept."""
        reasons = []
        hashes = self.hashes
        if hashes is None or not hashes.members:
            reasons.append(f"HashKV not compared ({self.hash_error or 'no member'})")
        elif hashes.unchecked:
            reasons.append(f"HashKV {hashes.unchecked}")
        reasons.extend(f"{p.process}'s keys not read back: {p.error}" for p in self.processes if p.error)
        return reasons

    @property
    def evidence(self) -> bool:
        """Something was shown to be wrong: the members' data, a write, a watch."""
        return bool(self._failed_checks()) or self.reads.violated > 0

    @property
    def failed(self) -> bool:
        return self.evidence or bool(self.unchecked)

    def line(self) -> str:
        """One line: ``audit: 3 members' HashKV equal at rev 1204551; 1,183,204 acknowledged writes, 0 lost; …``."""
        parts = [self._hash_part(), f"{self.writes:,} acknowledged writes, {self.lost:,} lost"]
        if self.unexplained:
            parts[-1] += f" ({self.unexplained:,} gone after deletes of other processes or of unknown outcome)"
        watches = self.watches
        if watches.watchers:
            parts.append(watches.describe())
        reads = self.reads
        if reads.checked:
            parts.append(f"{reads.checked:,} linearizable reads checked, {reads.violated:,} violations")
        errors = [f"{p.process}: {p.error}" for p in self.processes if p.error]
        if self.missing:
            errors.append(f"{self.missing} process{'es' * (self.missing > 1)} sent no counts")
        if errors:
            parts.append("not read back: " + "; ".join(errors))
        if self.evidence:  # a bug of the members' version may be why
            parts.extend(known_bug_names(self._versions(), self._failed_checks()))
        if self.kept:
            parts.append(f"the members' data and logs kept in {self.kept}")
        return ("audit FAILED: " if self.failed else "audit: ") + "; ".join(parts)

    @property
    def lost_keys(self) -> list[dict]:
        """The lost keys each process kept whole (``KeyCounts.lost_keys``), with the process that wrote them."""
        return [{**item, "process": p.process} for p in self.processes for item in p.keys.lost_keys]

    def known_bugs(self) -> list[str]:
        """The known correctness bugs of the members' versions (``etcd_users.known_bugs``) that can fail what failed,
        a line each."""
        return known_bug_lines(self._versions(), self._failed_checks())

    def _failed_checks(self) -> frozenset[str]:
        """Which of the known bugs' checks found something: the members' data and writes, the watches."""
        data = self.hashes_differ or bool(self.diverged) or self.lost > 0
        return frozenset(check for check, found in ((DATA, data), (WATCH, self.watches.violations > 0)) if found)

    def _versions(self) -> list[str]:
        return [member.version for member in self.hashes.members] if self.hashes is not None else []

    def _hash_part(self) -> str:
        hashes = self.hashes
        if hashes is None or not hashes.members:
            return f"HashKV not compared ({self.hash_error or 'no member'})"
        members = len(hashes.members)
        whose = f"{members} members'" if members > 1 else "1 member's"
        if hashes.forbidden:
            return f"HashKV not compared ({hashes.members[0].error}: only etcd's root role may ask for it)"
        diverged = hashes.diverged
        if diverged:
            revisions = ", ".join(f"{m.member} rev {m.revision}" for m in diverged)
            return (
                f"{whose} data DIVERGED: the same raft applied index {diverged[0].applied_index} at different "
                f"revisions ({revisions}); HashKV {'DIFFER' if hashes.differ else 'compared'} at rev {hashes.revision}"
            )
        compared = hashes.compared
        if 1 < len(compared) < members:  # the others compared all the same; the audit fails for the silent ones
            state = "DIFFER" if hashes.differ else "equal"
            return (
                f"{len(compared)} of {members} members' HashKV {state} at rev {hashes.revision}; "
                f"not compared: {hashes.silent_text()}"
            )
        if hashes.unchecked:
            return f"{whose} HashKV {hashes.unchecked}"
        if hashes.differ:
            return f"{whose} HashKV DIFFER at rev {hashes.revision}"
        return f"{whose} HashKV equal at rev {hashes.revision}"

    def error_lines(self) -> list[str]:
        """The evidence of a failure, a line each: the members and their hashes, the keys lost."""
        lines = []
        hashes = self.hashes
        if hashes is not None and (self.hashes_differ or self.diverged or hashes.unchecked or hashes.behind):
            lines.append(
                f"audit: the members at rev {hashes.revision}: " + ", ".join(m.describe() for m in hashes.members)
            )
        if self.hashes_differ:
            compared = hashes.compared
            members = ", ".join(f"{m.member} {m.hash:#010x}" for m in compared)
            compact = compared[0].compact_revision
            lines.append(f"audit: HashKV differs at rev {hashes.revision} (compact rev {compact}): {members}")
        if self.lost:
            stale = sum(p.keys.stale for p in self.processes)
            lines.append(
                f"audit: {self.lost:,} acknowledged writes lost: {stale:,} keys older than the write etcd "
                f"acknowledged, {self.lost - stale:,} keys gone that no process of the run deleted"
            )
        watches = self.watches
        if watches.violations:
            lines.append(
                f"audit: watch streams of {watches.watchers:,} watchers: {watches.missed:,} acknowledged puts not "
                f"delivered to a watcher, {watches.repeated:,} events delivered twice, {watches.disordered:,} below "
                f"the watcher's previous revision, {watches.split:,} responses that split a revision's events, "
                f"{watches.ahead:,} events after a progress notification at or above their revision, "
                f"{watches.prev_kv_wrong:,} prevKVs not the version or value delivered before"
            )
        reads = self.reads
        if reads.violated:
            by_member = "; ".join(
                f"{member}: " + ", ".join(f"{name} {count:,}" for name, count in sorted(names.items()))
                for member, names in sorted(reads.violations.items())
            )
            lines.append(
                f"audit: {reads.violated:,} linearizable reads did not reflect a write acknowledged before they were "
                f"sent ({by_member})"
            )
            lines.extend(f"audit: linearizability violation: {evidence_line(item)}" for item in reads.evidence)
            if reads.violated > len(reads.evidence):
                lines.append(f"audit: {reads.violated - len(reads.evidence):,} more violations, counted only")
        held = self.held_differently
        if held is not None:
            lines.append(f"audit: {held_differently_line(held)}")
        if self.evidence_files:
            lines.append(f"audit: the offending keys and each member's view of them: {', '.join(self.evidence_files)}")
        lines.extend(f"audit: could not be checked: {reason}" for reason in self.unchecked)
        if self.evidence:
            lines.extend(f"audit: {line}" for line in self.known_bugs())
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
                "diverged": [m.member for m in hashes.diverged] if hashes else [],
                "behind": [m.member for m in hashes.behind] if hashes else [],
                "not_compared": [m.member for m in hashes.silent] if hashes else [],
                "waited_s": round(hashes.waited, 3) if hashes else None,
                "members": [asdict(member) for member in hashes.members] if hashes else [],
                "error": self.hash_error,
            },
            "unchecked": self.unchecked,
            "known_bugs": self.known_bugs() if self.evidence else [],
            "writes": {"acknowledged": self.writes, "lost": self.lost, "unexplained": self.unexplained},
            "watches": asdict(self.watches),
            "reads": {**asdict(self.reads), "violated": self.reads.violated},
            "staleness": self.staleness().rows(),
            "processes": [process.to_report() for process in self.processes],
            "missing_processes": self.missing,
            "kept": self.kept,
            "evidence_files": self.evidence_files,
        }


def _why_not_comparable(hashes: Hashes) -> str:
    if hashes.silent:
        return hashes.silent_text()
    return "compact revisions differ: " + ", ".join(f"{m.member} {m.compact_revision}" for m in hashes.members)


def held_differently_line(held: dict) -> str:
    """``2 keys under /locust-etcd/ held differently by the members (…: 10,000 keys, …: 9,999 keys); the first:
    /locust-etcd/…07 (…: version 3, …: absent)``."""
    counts = keys_held_text(held["keys_held"])
    differing = held["differing"]
    keys = f"{differing:,} key{'s' * (differing != 1)}"
    line = f"{keys} under {held['prefix']} held differently by the members ({counts})"
    if held["keys"]:
        first = held["keys"][0]
        versions = ", ".join(
            f"{url}: {'absent' if entry is None else 'version ' + str(entry['version'])}"
            for url, entry in first["members"].items()
        )
        line += f"; the first: {_key_in_line(first['key'])} ({versions})"
    return line


KEY_SHOWN = 60  # a key longer than this is shown by its two ends in a line; the files keep it whole


def _key_in_line(key: str) -> str:
    """A key as a line shows it: ``/locust-etcd/0000000000…0000000008826 (268 characters)`` when it is long (the key
    space pads its keys to --etcd-key-size)."""
    if len(key) <= KEY_SHOWN:
        return key
    return f"{key[:30]}…{key[-20:]} ({len(key)} characters)"


def keys_held_text(keys_held: dict[str, int | str]) -> str:
    """``URL: 10,000 keys, URL: UNAVAILABLE``: how many keys each member holds under the prefix, or its error."""
    return ", ".join(f"{url}: {held if isinstance(held, str) else f'{held:,} keys'}" for url, held in keys_held.items())
