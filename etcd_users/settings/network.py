"""The network between the local etcd's members: the peer round trip the proxy adds, and raft's timing for it.

etcd's tuning guide (https://etcd.io/docs/v3.5/tuning/): "The value of heartbeat interval is recommended to be around
the maximum of average round-trip time (RTT) between members, normally around 0.5-1.5x the round-trip time", and
"Election timeouts must be at least 10 times the round-trip time so it can account for variance in the network".
"""

import re
from dataclasses import dataclass

from etcd_users.arguments import shown
from etcd_users.settings.declare import SettingsError

PEER_RTT_FLAG = "--etcd-local-peer-rtt"
HEARTBEAT_FLAG = "--etcd-local-heartbeat"
ELECTION_FLAG = "--etcd-local-election"
# what the local etcd runs with when they are not given (etcd_users.local.member)
DEFAULT_HEARTBEAT_MS = 100
DEFAULT_ELECTION_MS = 1000
PEER_RTT_MAX_MS = 10_000.0  # a longer round trip is a typo (10s for 10ms), and no election would ever end
# etcd's own limits: it refuses an election timeout under 5 heartbeats, or over 50 s
ELECTION_HEARTBEATS_MIN = 5
ELECTION_MAX_MS = 50_000

_UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}
_DURATION = r"([0-9]+(?:\.[0-9]+)?)(us|µs|ms|s)"
_PEER_RTT = re.compile(rf"^{_DURATION}(?:(?:±|\+-|\+/-){_DURATION})?$")


@dataclass(frozen=True)
class PeerRtt:
    """A round trip between members, and how much each one may stray from it."""

    rtt_ms: float
    jitter_ms: float = 0.0

    @property
    def one_way_ms(self) -> float:
        """The delay of each direction of a connection: both go through the proxy."""
        return self.rtt_ms / 2

    @property
    def one_way_jitter_ms(self) -> float:
        return self.jitter_ms / 2

    @property
    def max_rtt_ms(self) -> float:
        return self.rtt_ms + self.jitter_ms

    def __str__(self) -> str:
        return f"{self.rtt_ms:g}ms" + (f"±{self.jitter_ms:g}ms" if self.jitter_ms else "")


def parse_peer_rtt(flag: str, text: str) -> PeerRtt | None:
    """``10ms``, ``10ms±2ms`` or ``10ms+-2ms`` (units us, ms, s); empty: None, no proxy."""
    text = text.strip()
    if not text:
        return None
    match = _PEER_RTT.match(text.replace(" ", ""))
    if match is None:
        raise SettingsError(
            f"{flag}: {shown(text)} is not a round trip; write a duration with its unit, optionally with a jitter: "
            "10ms, 10ms±2ms or 10ms+-2ms (0ms: the proxy without delay)"
        )
    rtt = float(match[1]) * _UNITS_MS[match[2]]
    jitter = float(match[3]) * _UNITS_MS[match[4]] if match[3] else 0.0
    if rtt > PEER_RTT_MAX_MS:
        raise SettingsError(f"{flag}: {shown(text)} is more than {PEER_RTT_MAX_MS / 1000:g}s; give e.g. 10ms")
    if jitter > rtt:
        raise SettingsError(f"{flag}: the jitter of {shown(text)} is more than the round trip; give e.g. 10ms±2ms")
    return PeerRtt(rtt, jitter)


def timing_ms(
    heartbeat_ms: int, election_ms: int, flags: tuple[str, str] = (HEARTBEAT_FLAG, ELECTION_FLAG)
) -> tuple[int, int]:
    """The heartbeat and election timeout the members run with (0: the local etcd's default); SettingsError where
    etcd itself would refuse them. ``flags``: the two options' names, as the user gave them."""
    heartbeat_flag, election_flag = flags
    for flag, value in ((heartbeat_flag, heartbeat_ms), (election_flag, election_ms)):
        if value < 0:
            raise SettingsError(f"{flag}: {shown(value)} must be milliseconds above zero, or 0 for the default")
    heartbeat = heartbeat_ms or DEFAULT_HEARTBEAT_MS
    election = election_ms or DEFAULT_ELECTION_MS
    if election < ELECTION_HEARTBEATS_MIN * heartbeat:
        raise SettingsError(
            f"{election_flag}: {election} ms is less than {ELECTION_HEARTBEATS_MIN} heartbeats of {heartbeat} ms, "
            f"which etcd refuses; give {heartbeat_flag} and {election_flag} together, e.g. 100 and 1000"
        )
    if election > ELECTION_MAX_MS:
        raise SettingsError(f"{election_flag}: {election} ms is more than etcd's limit of {ELECTION_MAX_MS} ms")
    return heartbeat, election


def timing_warnings(
    peer_rtt: PeerRtt | None,
    heartbeat_ms: int,
    election_ms: int,
    flags: tuple[str, str] = (HEARTBEAT_FLAG, ELECTION_FLAG),
) -> list[str]:
    """Lines telling where the heartbeat and election timeout are below etcd's tuning guide for the round trip."""
    heartbeat_flag, election_flag = flags
    if peer_rtt is None or peer_rtt.max_rtt_ms <= 0:
        return []
    worst = peer_rtt.max_rtt_ms
    warnings = []
    if heartbeat_ms < worst:
        warnings.append(
            f"{heartbeat_flag}: {heartbeat_ms} ms is below the peer round trip of up to {worst:g} ms; etcd's tuning "
            "guide sets the heartbeat around the maximum round trip (0.5-1.5x of it), else heartbeats pile up"
        )
    if election_ms < 10 * worst:
        warnings.append(
            f"{election_flag}: {election_ms} ms is below 10 round trips ({10 * worst:g} ms); etcd's tuning guide "
            "wants at least that, else members call elections on a slow network"
        )
    return warnings
