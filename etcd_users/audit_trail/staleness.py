"""How stale each member's serializable reads were: revisions and microseconds behind, per member, in HDR histograms
that merge across processes. Pure.

The users' thread appends two integers per read; they are counted into the histograms in batches (``hdr``), and the
histograms travel to the master encoded with the process's audit counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from etcd_users import hdr

_BATCH = 4096
PERCENTILES = (50.0, 99.0)


@dataclass
class MemberStaleness:
    revisions: HdrHistogram  # revisions behind
    micros: HdrHistogram  # microseconds behind

    def add(self, other: MemberStaleness) -> None:
        self.revisions = hdr.add(self.revisions, other.revisions)
        self.micros = hdr.add(self.micros, other.micros)

    def row(self, member: str) -> dict:
        """The member's figures: reads, revisions behind (P50, P99, max), milliseconds behind (P50, P99, max)."""
        revisions = hdr.percentiles_us(self.revisions, PERCENTILES)
        micros = hdr.percentiles_us(self.micros, PERCENTILES)
        return {
            "member": member,
            "reads": self.revisions.total_count,
            "revisions_p50": revisions[0],
            "revisions_p99": revisions[1],
            "revisions_max": self.revisions.max_value,
            "ms_p50": micros[0] / 1000.0,
            "ms_p99": micros[1] / 1000.0,
            "ms_max": self.micros.max_value / 1000.0,
        }


class Staleness:
    """The serializable reads measured, per member (``host:port``)."""

    def __init__(self) -> None:
        self.members: dict[str, MemberStaleness] = {}
        self._pending: dict[str, tuple[list[int], list[int]]] = {}

    def record(self, member: str, revisions: int, micros: int) -> None:
        pending = self._pending.get(member)
        if pending is None:
            pending = self._pending[member] = ([], [])
        pending[0].append(revisions)
        pending[1].append(micros)
        if len(pending[0]) >= _BATCH:
            self._fold(member)

    def merged(self) -> dict[str, MemberStaleness]:
        """Every read so far, per member."""
        for member in list(self._pending):
            self._fold(member)
        return self.members

    def add(self, other: dict[str, MemberStaleness]) -> None:
        for member, figures in other.items():
            mine = self.members.get(member)
            if mine is None:
                self.members[member] = MemberStaleness(hdr.add(None, figures.revisions), hdr.add(None, figures.micros))
            else:
                mine.add(figures)

    def rows(self) -> list[dict]:
        return [figures.row(member) for member, figures in sorted(self.merged().items())]

    def to_report(self) -> dict[str, list[str]]:
        return {
            member: [figures.revisions.encode().decode("ascii"), figures.micros.encode().decode("ascii")]
            for member, figures in self.merged().items()
        }

    @classmethod
    def from_report(cls, report: dict[str, list[str]]) -> Staleness:
        staleness = cls()
        for member, (revisions, micros) in report.items():
            staleness.members[member] = MemberStaleness(HdrHistogram.decode(revisions), HdrHistogram.decode(micros))
        return staleness

    def _fold(self, member: str) -> None:
        revisions, micros = self._pending.pop(member)
        if not revisions:
            return
        batch = MemberStaleness(hdr.histogram_of_counts(revisions), hdr.histogram_of_counts(micros))
        self.add({member: batch})


def worst(rows: list[dict], figure: str) -> dict | None:
    """The row of the member with the highest ``figure`` (``ms_p99``, ``revisions_p99``), or None without reads."""
    measured = [row for row in rows if row["reads"]]
    return max(measured, key=lambda row: row[figure]) if measured else None
