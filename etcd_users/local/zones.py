"""The local etcd's zones: what each pair of members in different zones adds to their round trip, and the zone a member
added during a run joins. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from etcd_users.settings.round_trip import PeerRtt


def zone_pairs(zones: Sequence[str], peer_rtt: PeerRtt, zone_rtt: PeerRtt) -> dict[tuple[int, int], PeerRtt]:
    """Each pair of members (by index, the lower first) in different zones, and the round trip the peer proxy adds
    between them on top of ``peer_rtt``, so that they are ``zone_rtt`` apart; members of one zone stay ``peer_rtt``
    apart. The zone's jitter is drawn on its own, and is at most what the pair adds (the proxy's bound)."""
    extra_ms = max(zone_rtt.rtt_ms - peer_rtt.rtt_ms, 0.0)
    extra = PeerRtt(extra_ms, min(zone_rtt.jitter_ms, extra_ms))
    return {
        (first, second): extra
        for first, second in combinations(range(len(zones)), 2)
        if zones[first] != zones[second] and extra.rtt_ms > 0
    }


def pairs_of(index: int, zones: Sequence[str], peer_rtt: PeerRtt, zone_rtt: PeerRtt) -> dict[tuple[int, int], PeerRtt]:
    """The pairs of ``zone_pairs`` that member ``index`` is in (a member added: its links to the others)."""
    return {pair: rtt for pair, rtt in zone_pairs(zones, peer_rtt, zone_rtt).items() if index in pair}


def zone_for_added(zones: Sequence[str]) -> str:
    """The zone a member added joins when none is named: the one with the fewest members (the first of them in the
    members' order), as an operator spreads a cluster over its zones."""
    order = list(dict.fromkeys(zones))
    return min(order, key=lambda zone: (zones.count(zone), order.index(zone)))
