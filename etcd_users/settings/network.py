"""The network between the local etcd's members: the peer round trip the proxy adds, and raft's timing for it.

etcd's tuning guide (https://etcd.io/docs/v3.5/tuning/): "The value of heartbeat interval is recommended to be around
the maximum of average round-trip time (RTT) between members, normally around 0.5-1.5x the round-trip time", and
"Election timeouts must be at least 10 times the round-trip time so it can account for variance in the network".
"""

import re

from etcd_users.core.arguments import shown
from etcd_users.core.declare import SettingsError
from etcd_users.settings.round_trip import JITTER_TOO_LARGE, PEER_RTT_MAX_MS, TOO_LONG, PeerRtt, parse_round_trip

PEER_RTT_FLAG = "--etcd-local-peer-rtt"
ZONES_FLAG = "--etcd-local-zones"
ZONE_RTT_FLAG = "--etcd-local-zone-rtt"
ZONE_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
HEARTBEAT_FLAG = "--etcd-local-heartbeat"
ELECTION_FLAG = "--etcd-local-election"
# what the local etcd runs with when they are not given (etcd_users.local.member)
DEFAULT_HEARTBEAT_MS = 100
DEFAULT_ELECTION_MS = 1000
# etcd's own limits: it refuses an election timeout under 5 heartbeats, or over 50 s
ELECTION_HEARTBEATS_MIN = 5
ELECTION_MAX_MS = 50_000


def parse_peer_rtt(flag: str, text: str) -> PeerRtt | None:
    """``10ms``, ``10ms±2ms`` or ``10ms+-2ms`` (units us, ms, s); empty: None, no proxy."""
    text = text.strip()
    if not text:
        return None
    try:
        return parse_round_trip(text)
    except ValueError as error:
        why = str(error)
    if why == TOO_LONG:
        raise SettingsError(f"{flag}: {shown(text)} is more than {PEER_RTT_MAX_MS / 1000:g}s; give e.g. 10ms")
    if why == JITTER_TOO_LARGE:
        raise SettingsError(f"{flag}: the jitter of {shown(text)} is more than the round trip; give e.g. 10ms±2ms")
    hint = " (0ms: the proxy without delay)" if flag == PEER_RTT_FLAG else ""
    raise SettingsError(
        f"{flag}: {shown(text)} is not a round trip; write a duration with its unit, optionally with a jitter: "
        f"10ms, 10ms±2ms or 10ms+-2ms{hint}"
    )


def parse_zones(flag: str, text: str) -> tuple[str, ...]:
    """``a,a,b``: each member's zone, in the members' order; empty: no zones."""
    text = text.strip()
    if not text:
        return ()
    names = tuple(name.strip() for name in text.split(","))
    bad = next((name for name in names if not ZONE_NAME.fullmatch(name)), None)
    if bad is not None:
        raise SettingsError(
            f"{flag}: {shown(bad)} is not a zone's name; give each member's zone in letters, digits, '-' or '_', "
            "comma-separated, e.g. a,a,b"
        )
    if len(set(names)) < 2:
        raise SettingsError(f"{flag}: {shown(text)} puts every member in one zone; give two zones at least, e.g. a,a,b")
    return names


def example_zones(members: int) -> str:
    """Zones for ``members`` members as an operator spreads them, two to a zone (``a,a,b``, ``a,a,b,b,c``)."""
    return ",".join("abcdefghijklmnopqrstuvwxyz"[index // 2] for index in range(members))


def check_zones(
    zones: tuple[str, ...],
    zone_rtt: PeerRtt | None,
    peer_rtt: PeerRtt | None,
    members: int,
    flags: tuple[str, str, str, str] = (ZONES_FLAG, ZONE_RTT_FLAG, PEER_RTT_FLAG, "--etcd-local-members"),
) -> None:
    """Zones need their round trip, the peer proxy that makes it, and a zone per member; SettingsError in one line
    otherwise. ``flags``: the options of the zones, their round trip, the peer round trip and the members, as the user
    gave them."""
    zones_flag, zone_rtt_flag, peer_rtt_flag, members_flag = flags
    if zone_rtt is not None and not zones:
        raise SettingsError(f"{zone_rtt_flag}: the round trip between zones needs {zones_flag}, e.g. a,a,b")
    if not zones:
        return
    if zone_rtt is None:
        raise SettingsError(f"{zones_flag}: the zones need {zone_rtt_flag}, the round trip between them, e.g. 30ms")
    if peer_rtt is None:
        raise SettingsError(
            f"{zones_flag}: zones are made in the peer proxy, which {peer_rtt_flag} starts; add {peer_rtt_flag} 0ms "
            "(the round trip within a zone) or e.g. 1ms"
        )
    if len(zones) != members:
        size = members if members > 1 else 3  # zones need two members at least
        raise SettingsError(
            f"{zones_flag}: {len(zones)} zones for {members} member{'s' * (members > 1)}; give one per member of "
            f"{members_flag} {size}, e.g. {example_zones(size)}"
        )
    if zone_rtt.rtt_ms < peer_rtt.rtt_ms:
        raise SettingsError(
            f"{zone_rtt_flag}: {zone_rtt} is less than the round trip within a zone ({peer_rtt_flag} {peer_rtt}); give "
            "at least that"
        )


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
