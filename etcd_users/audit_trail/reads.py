"""Reads judged against the writes etcd acknowledged to the same process. Pure.

A linearizable read reflects every write that completed before it was sent: its header revision must be at least the
newest revision acknowledged to this process when it was sent, and a key of the key space it read must carry a
``mod_revision`` at least that of the key's latest acknowledged write (a later write by anyone is legal). A key absent
from the answer is not judged: another client may have deleted it. A read that breaks either is a violation, counted
by member and request name, and the first ``EVIDENCE_KEPT`` kept in full. Writes of unknown outcome (a timeout, a
dropped proposal) are never acknowledged, so they never make a violation.

A serializable read may be stale; how stale is measured: the revisions its member was behind the newest acknowledged
write (``max(0, newest − header revision)``) and the milliseconds since the first acknowledged write it did not reflect
was acknowledged (0 when it reflected them all), per member (``etcd_users.audit_trail.staleness``).

The send time and ``newest`` are taken before the call; the judgement runs after the call's timing, on the users'
thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from etcd_users.audit_trail.acknowledged import AcknowledgedWrites
from etcd_users.audit_trail.staleness import Staleness

EVIDENCE_KEPT = 100


@dataclass
class ReadCounts:
    """A process's linearizable reads judged, shipped to the master with its audit counts."""

    checked: int = 0
    violations: dict[str, dict[str, int]] = field(default_factory=dict)  # member -> request name -> count
    evidence: list[dict] = field(default_factory=list)  # the first EVIDENCE_KEPT violations in full

    @property
    def violated(self) -> int:
        return sum(sum(names.values()) for names in self.violations.values())

    def add(self, other: ReadCounts) -> None:
        self.checked += other.checked
        for member, names in other.violations.items():
            mine = self.violations.setdefault(member, {})
            for name, count in names.items():
                mine[name] = mine.get(name, 0) + count
        self.evidence.extend(other.evidence[: max(0, EVIDENCE_KEPT - len(self.evidence))])


class ReadChecks:
    """One process's checks of its reads, on its run record (``etcd_users.audit_trail.record``)."""

    def __init__(self, writes: AcknowledgedWrites | None = None) -> None:
        self.writes = writes if writes is not None else AcknowledgedWrites()
        self.counts = ReadCounts()
        self.staleness = Staleness()
        self._unix_offset = time.time() - time.perf_counter()  # perf_counter seconds to unix seconds, for evidence

    def linearizable(
        self, sent_at: float, newest: int, mark: int, response, key: bytes, member: str, name: str
    ) -> None:
        """Judge one linearizable range answered with ``response``: ``newest`` and ``mark`` (the ledger's mark of its
        single key of the key space, 0 for none) as they were when it was sent at ``sent_at``."""
        counts = self.counts
        counts.checked += 1
        served = response.header.revision
        if served < newest:
            self._violation(member, name, key, newest, served, sent_at, "header revision below an acknowledged write")
        elif mark:
            written = mark >> 1
            kvs = response.kvs
            if kvs and kvs[0].mod_revision < written:
                reason = "deleted key still present" if mark & 1 else "key older than its acknowledged write"
                self._violation(member, name, key, written, kvs[0].mod_revision, sent_at, reason)

    def serializable(self, sent_at: float, newest: int, served: int, member: str) -> None:
        """Measure one serializable read served at revision ``served``, sent at ``sent_at`` when ``newest`` was the
        newest acknowledged revision."""
        behind = newest - served
        if behind <= 0:
            self.staleness.record(member, 0, 0)
            return
        first = self.writes.first_above(served)
        micros = int((sent_at - first[1]) * 1_000_000) if first is not None and first[1] < sent_at else 0
        self.staleness.record(member, behind, micros)

    def _violation(
        self, member: str, name: str, key: bytes, written: int, served: int, sent_at: float, reason: str
    ) -> None:
        counts = self.counts
        names = counts.violations.setdefault(member, {})
        names[name] = names.get(name, 0) + 1
        if len(counts.evidence) >= EVIDENCE_KEPT:
            return
        acknowledged = self.writes.first_above(written - 1)
        counts.evidence.append(
            {
                "member": member,
                "name": name,
                "key": key.decode(errors="replace"),
                "reason": reason,
                "write_revision": written,
                # when this process first knew a write at that revision or above acknowledged (None: out of window)
                "write_acknowledged_at": round(acknowledged[1] + self._unix_offset, 6) if acknowledged else None,
                "read_revision": served,
                "read_sent_at": round(sent_at + self._unix_offset, 6),
            }
        )


def evidence_line(evidence: dict) -> str:
    """One violation as a line: ``127.0.0.1:2379 range/linearizable /k/0001: read at rev 9 sent 0.0042 s after …``."""
    acknowledged = evidence.get("write_acknowledged_at")
    after = (
        f"sent {evidence['read_sent_at'] - acknowledged:.6f} s after rev {evidence['write_revision']} was acknowledged"
        if acknowledged is not None
        else f"sent after rev {evidence['write_revision']} was acknowledged"
    )
    return (
        f"{evidence['member']} {evidence['name']} {evidence['key']}: {evidence['reason']}: "
        f"read at rev {evidence['read_revision']} {after}"
    )
