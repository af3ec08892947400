"""Zones of the local etcd (--etcd-local-zones, --etcd-local-zone-rtt): each member's own round trip in the peer proxy,
and the one-line refusals of zones that cannot be made."""

import argparse

import pytest

from etcd_users.features import OPTIONS
from etcd_users.local import LocalCluster
from etcd_users.round_trip import PeerRtt
from etcd_users.settings import SettingsError, settings_from_options
from etcd_users.settings.network import zone_round_trips


def _settings(**given):
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_local_members = 3
    for name, value in given.items():
        setattr(namespace, f"etcd_{name}", value)
    return settings_from_options(namespace)


@pytest.mark.parametrize(
    ("zones", "own"),
    [
        (("a", "a", "b"), [None, None, PeerRtt(28.0, 4.0)]),  # the member alone in b: 2 ms + 28 ms from the others
        (("a", "b", "c"), [PeerRtt(28.0, 4.0)] * 3),  # every pair in two zones: 2 ms + the larger own, 28 ms
        (("x", "y", "x"), [None, PeerRtt(28.0, 4.0), None]),
    ],
)
def test_a_member_alone_in_its_zone_gets_the_difference_of_the_round_trips(zones, own):
    assert zone_round_trips(zones, PeerRtt(2.0), PeerRtt(30.0, 4.0)) == own


def test_zones_become_settings_and_a_run_of_the_tool_s_own_etcd_takes_them():
    settings = _settings(local_zones="a, a,b", local_zone_rtt="30ms±4ms", local_peer_rtt="2ms")
    assert settings.local_zones == ("a", "a", "b") and settings.local_zone_rtt == PeerRtt(30.0, 4.0)


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


def test_a_delay_adds_to_a_member_s_zone_and_its_end_goes_back_to_the_zone():
    cluster = LocalCluster(3, peer_rtt=PeerRtt(0.0), zones=("a", "a", "b"), zone_rtt=PeerRtt(30.0))
    cluster._members = [object()] * 3  # the members' places: the delays go to the proxy only
    cluster.peer_links = proxy = _Recorded()
    cluster.delay_member(2, PeerRtt(40.0, 10.0))
    cluster.undelay_member(2)
    cluster.delay_member(0, PeerRtt(40.0))
    cluster.undelay_member(0)
    assert proxy.sent == ["delay 2 70ms±10ms", "delay 2 30ms", "delay 0 40ms", "undelay 0"]
