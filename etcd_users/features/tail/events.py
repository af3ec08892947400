"""An event of a run's timeline and the causes' one vocabulary. Pure.

An event read from a member's /metrics happened between two scrapes (``since`` .. ``at``); a client's event or a
disruption has its own times. ``at`` is when it was seen (unix seconds), ``since`` the earliest it can have begun.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

CAUSES = (
    *("leader-change", "compaction", "defrag", "snapshot", "fsync", "commit", "slow-apply", "heartbeat-failure"),
    *("proposals-failed", "peer-rtt", "member-unanswering", "client-cpu", "client-gc", "loop-lag", "reconnect"),
)
DISRUPTION = "disruption:"  # + the disruption's action: disruption:pause, disruption:kill-leader, ...
UNEXPLAINED = "unexplained"

# How strongly a kind of event explains a slow second beside it: what the tool did itself first, then a member that
# stopped answering or changed its leader, then the disk's own work, then the client's; a busy client is common and
# says the least. Ties go to the larger figure (``Event.size``).
WEIGHTS = {
    "disruption": 100,
    "member-unanswering": 90,
    "leader-change": 85,
    "defrag": 80,
    "snapshot": 70,
    "proposals-failed": 65,
    "heartbeat-failure": 60,
    "client-gc": 58,
    "slow-apply": 55,
    "fsync": 50,
    "commit": 48,
    "compaction": 45,
    "reconnect": 42,
    "peer-rtt": 40,
    "loop-lag": 35,
    "client-cpu": 20,
}


def known_cause(cause: str) -> bool:
    return cause in CAUSES or (cause.startswith(DISRUPTION) and len(cause) > len(DISRUPTION))


def weight(cause: str) -> int:
    return WEIGHTS["disruption"] if cause.startswith(DISRUPTION) else WEIGHTS.get(cause, 0)


def clock(at: float) -> str:
    """A time of day to the millisecond, UTC (the run's other files use unix seconds)."""
    return time.strftime("%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}"


@dataclass(frozen=True)
class Event:
    at: float  # when it was seen, unix seconds
    cause: str
    member: str  # a member (host:port), or the client process (local, master, a worker's id)
    evidence: str
    since: float | None = None  # the earliest it can have begun (the scrape before); None: at ``at``
    size: float = 0.0  # how big, in the kind's own unit: ranks events of one kind

    @property
    def start(self) -> float:
        return self.at if self.since is None else min(self.since, self.at)

    def to_dict(self) -> dict:
        return {"at": round(self.at, 3), "cause": self.cause, "member": self.member, "evidence": self.evidence}

    @classmethod
    def from_dict(cls, item: dict, since: float | None = None) -> Event:
        return cls(float(item["at"]), str(item["cause"]), str(item["member"]), str(item["evidence"]), since)
