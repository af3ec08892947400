"""Zones of the local etcd (--etcd-local-zones, --etcd-local-zone-rtt): the round trip of each pair of members in the
peer proxy, the zone a member added joins, and the one-line refusals of zones that cannot be made."""

import argparse

import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.local import LocalCluster
from etcd_users.local.zones import pairs_of, zone_for_added, zone_pairs
from etcd_users.settings import SettingsError, settings_from_options
from etcd_users.settings.network import example_zones
from etcd_users.settings.round_trip import PeerRtt


def _settings(members: int = 3, **given):
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_local_members = members
    for name, value in given.items():
        setattr(namespace, f"etcd_{name}", value)
    return settings_from_options(namespace)


FAR = PeerRtt(28.0, 4.0)  # 2 ms within a zone + 28 ms: 30 ms between zones


@pytest.mark.parametrize(
    ("zones", "far_pairs"),
    [
        (("a", "a", "b"), [(0, 2), (1, 2)]),  # the member alone in b is far from both of a, which are near each other
        (("a", "b", "c"), [(0, 1), (0, 2), (1, 2)]),
        (("x", "y", "x"), [(0, 1), (1, 2)]),
        # five members, two zones of two and one of one: each member far from the three of the other zones only
        (("a", "a", "b", "b", "c"), [(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 4), (3, 4)]),
    ],
)
def test_each_pair_of_members_in_different_zones_gets_the_difference_of_the_round_trips(zones, far_pairs):
    assert zone_pairs(zones, PeerRtt(2.0), PeerRtt(30.0, 4.0)) == dict.fromkeys(far_pairs, FAR)
    assert pairs_of(2, zones, PeerRtt(2.0), PeerRtt(30.0, 4.0)) == {pair: FAR for pair in far_pairs if 2 in pair}


def test_a_zone_as_far_as_the_peers_adds_nothing_and_its_jitter_never_exceeds_what_it_adds():
    assert zone_pairs(("a", "b"), PeerRtt(10.0), PeerRtt(10.0, 2.0)) == {}
    assert zone_pairs(("a", "b"), PeerRtt(8.0), PeerRtt(10.0, 4.0)) == {(0, 1): PeerRtt(2.0, 2.0)}


@pytest.mark.parametrize(
    ("zones", "joins"),
    [(("a", "a", "b"), "b"), (("a", "a", "b", "b", "c"), "c"), (("a", "b", "c"), "a"), (("x", "y", "y", "x"), "x")],
)
def test_a_member_added_joins_the_zone_with_the_fewest_members(zones, joins):
    assert zone_for_added(zones) == joins


def test_zones_for_any_size_are_spread_two_to_a_zone():
    assert [example_zones(size) for size in (2, 3, 4, 5)] == ["a,a", "a,a,b", "a,a,b,b", "a,a,b,b,c"]


def test_zones_become_settings_and_a_run_of_the_tool_s_own_etcd_takes_them():
    settings = _settings(local_zones="a, a,b", local_zone_rtt="30ms±4ms", local_peer_rtt="2ms")
    assert settings.local_zones == ("a", "a", "b") and settings.local_zone_rtt == PeerRtt(30.0, 4.0)
    five = _settings(5, local_zones="a,a,b,b,c", local_zone_rtt="10ms", local_peer_rtt="0ms")
    assert five.local_zones == ("a", "a", "b", "b", "c") and five.local_members == 5
    added = _settings(local_zones="a,a,b", local_zone_rtt="10ms", local_peer_rtt="0ms", disrupt="add-learner=c@2s")
    assert added.disruptions.schedule[0].value == "c"


@pytest.mark.parametrize(
    ("given", "line"),
    [
        (
            {"local_zones": "a,a,b!"},
            "--etcd-local-zones: 'b!' is not a zone's name; give each member's zone in letters, digits, '-' or '_', "
            "comma-separated, e.g. a,a,b",
        ),
        (
            {"local_zones": "a,a,a"},
            "--etcd-local-zones: 'a,a,a' puts every member in one zone; give two zones at least, e.g. a,a,b",
        ),
        (
            {"local_zone_rtt": "30ms"},
            "--etcd-local-zone-rtt: the round trip between zones needs --etcd-local-zones, e.g. a,a,b",
        ),
        (
            {"local_zones": "a,a,b", "local_peer_rtt": "0ms"},
            "--etcd-local-zones: the zones need --etcd-local-zone-rtt, the round trip between them, e.g. 30ms",
        ),
        (
            {"local_zones": "a,a,b", "local_zone_rtt": "30ms"},
            "--etcd-local-zones: zones are made in the peer proxy, which --etcd-local-peer-rtt starts; add "
            "--etcd-local-peer-rtt 0ms (the round trip within a zone) or e.g. 1ms",
        ),
        (
            {"local_zones": "a,b", "local_zone_rtt": "30ms", "local_peer_rtt": "0ms"},
            "--etcd-local-zones: 2 zones for 3 members; give one per member of --etcd-local-members 3, e.g. a,a,b",
        ),
        (
            {"local_zones": "a,a,b", "local_zone_rtt": "5ms", "local_peer_rtt": "10ms"},
            "--etcd-local-zone-rtt: 5ms is less than the round trip within a zone (--etcd-local-peer-rtt 10ms); give "
            "at least that",
        ),
        (
            {"members": 5, "local_zones": "a,a,b", "local_zone_rtt": "10ms", "local_peer_rtt": "0ms"},
            "--etcd-local-zones: 3 zones for 5 members; give one per member of --etcd-local-members 5, e.g. a,a,b,b,c",
        ),
        (
            {"members": 1, "local_zones": "a,b", "local_zone_rtt": "10ms", "local_peer_rtt": "0ms"},
            "--etcd-local-zones: 2 zones for 1 member; give one per member of --etcd-local-members 3, e.g. a,a,b",
        ),
        (
            {"disrupt": "add-learner=b@2s"},
            "--etcd-disrupt: 'add-learner=b@2s' puts the new member in zone b, and the local etcd has no zones; give "
            "--etcd-local-zones (e.g. a,a,b) or leave out =b",
        ),
    ],
)
def test_zones_that_cannot_be_made_are_refused_in_one_line(given, line):
    with pytest.raises(SettingsError) as refused:
        _settings(**given)
    assert str(refused.value) == line


class _Recorded:
    """The peer proxy's control, as commands."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def delay(self, index: int, rtt: PeerRtt) -> None:
        self.sent.append(f"delay {index} {rtt}")

    def undelay(self, index: int) -> None:
        self.sent.append(f"undelay {index}")

    def link(self, listen_port: int, target_port: int) -> int:
        self.sent.append("link")
        return 0

    def pair(self, first: int, second: int, rtt: PeerRtt | None) -> None:
        self.sent.append(f"pair {first} {second} {rtt}")


def _placed(tmp_path, zones: tuple[str, ...]) -> tuple[LocalCluster, _Recorded]:
    """A cluster of ``zones`` with its members' places made, not started: what it asks of the proxy is recorded."""
    cluster = LocalCluster(len(zones), peer_rtt=PeerRtt(0.0), zones=zones, zone_rtt=PeerRtt(30.0))
    cluster._base_dir = tmp_path
    cluster._members = [cluster._new_member(index, [0, 0, 0]) for index in range(len(zones))]
    cluster.peer_links = proxy = _Recorded()
    return cluster, proxy


def test_a_delay_adds_to_the_zones_and_its_end_goes_back_to_them(tmp_path):
    cluster, proxy = _placed(tmp_path, ("a", "a", "b"))
    cluster.delay_member(2, PeerRtt(40.0, 10.0))
    cluster.undelay_member(2)
    # the zones are pairs of their own in the proxy: a member's delay is only the delay, on top of them
    assert proxy.sent == ["delay 2 40ms±10ms", "undelay 2"]


def test_a_member_added_joins_a_zone_and_gets_its_round_trip_to_the_members_of_the_others(tmp_path):
    cluster, proxy = _placed(tmp_path, ("a", "a", "b", "b", "c"))
    assert cluster.add_member() == 5 and cluster.zone(5) == "c"  # the zone with the fewest members
    assert proxy.sent == ["link"] + [f"pair {index} 5 30ms" for index in range(4)]
    proxy.sent.clear()
    assert cluster.add_member("a") == 6 and cluster.zone(6) == "a"
    assert proxy.sent == ["link"] + [f"pair {index} 6 30ms" for index in (2, 3, 4, 5)]
    assert cluster.describe_peer_network() == "peer round trip 0ms through the peer proxy, zones a,a,b,b,c 30ms apart"


def test_a_schedule_that_cuts_or_slows_links_has_the_peer_proxy_without_a_round_trip_asked(tmp_path):
    from etcd_users.local import cluster_from_settings
    from etcd_users.local.peer_links import PeerLinks
    from etcd_users.target.cluster import _check_proxy

    settings = _settings(disrupt="cut:leader->follower@3s+2s")
    cluster, _ = cluster_from_settings(settings, 3)
    assert cluster.peer_rtt == PeerRtt(0.0) and settings.local_peer_rtt is None  # the proxy, at 0ms
    assert cluster_from_settings(_settings(disrupt="kill@3s+2s"), 3)[0].peer_rtt is None  # none needed: none
    # a web UI run on a local etcd started without the proxy: refused in one line
    with pytest.raises(SettingsError) as refused:
        _check_proxy(LocalCluster(3), settings)
    assert str(refused.value) == (
        "--etcd-disrupt: 'cut:leader->follower@3s+2s' cuts a member's messages to another in the peer proxy, and the "
        "local etcd started without it; start the tool again with this schedule, or with --etcd-local-peer-rtt 0ms"
    )
    proxied = LocalCluster(3, peer_rtt=PeerRtt(0.0))
    proxied.peer_links = PeerLinks([], PeerRtt(0.0), tmp_path / "proxy.log")  # its proxy, as a start makes it
    _check_proxy(proxied, settings)
