"""A round trip between members as the options write it: ``10ms``, ``10ms±2ms`` or ``10ms+-2ms`` (units us, ms, s).

Pure, and a leaf: read by the network settings (``--etcd-local-peer-rtt``, ``settings.network``), the local etcd's
zones (``local.zones``) and the disruption grammar (``delay``'s ``=RTT``, ``features.disruptions.schedule``).
"""

import re
from dataclasses import dataclass

PEER_RTT_MAX_MS = 10_000.0  # a longer round trip is a typo (10s for 10ms), and no election would ever end

_UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}
_DURATION = r"([0-9]+(?:\.[0-9]+)?)(us|µs|ms|s)"
_PEER_RTT = re.compile(rf"^{_DURATION}(?:(?:±|\+-|\+/-){_DURATION})?$")

NOT_A_ROUND_TRIP = "is not a round trip"
TOO_LONG = f"is more than {PEER_RTT_MAX_MS / 1000:g}s"
JITTER_TOO_LARGE = "has a jitter more than the round trip"


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


def parse_round_trip(text: str) -> PeerRtt:
    """The round trip ``text`` writes; ValueError with one of NOT_A_ROUND_TRIP, TOO_LONG or JITTER_TOO_LARGE."""
    match = _PEER_RTT.match(text.strip().replace(" ", ""))
    if match is None:
        raise ValueError(NOT_A_ROUND_TRIP)
    rtt = float(match[1]) * _UNITS_MS[match[2]]
    jitter = float(match[3]) * _UNITS_MS[match[4]] if match[3] else 0.0
    if rtt > PEER_RTT_MAX_MS:
        raise ValueError(TOO_LONG)
    if jitter > rtt:
        raise ValueError(JITTER_TOO_LARGE)
    return PeerRtt(rtt, jitter)
