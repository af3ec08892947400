"""The grammar of ``--etcd-disrupt`` (``etcd_users.features.disruptions.schedule``): good items parse to exact records,
each bad one is refused in one line that names the option, quotes the item and shows the expected form."""

import argparse

import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.features.disruptions.options import DisruptionSettings
from etcd_users.features.disruptions.schedule import (
    Disruption,
    ScheduleError,
    check_allowed,
    parse_item,
    parse_schedule,
    parse_seconds,
)
from etcd_users.settings import SettingsError
from etcd_users.settings.round_trip import PeerRtt
from etcd_users.target.action_table import ACTIONS, NONE, REQUIRED

URL_A, URL_B = "http://127.0.0.1:2379", "http://127.0.0.1:22379"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("defrag@120s", Disruption("defrag", "leader", 120.0)),
        ("defrag:all@2m", Disruption("defrag", "all", 120.0)),
        ("defrag:follower@1.5s", Disruption("defrag", "follower", 1.5)),
        (f"defrag:{URL_A}@10", Disruption("defrag", URL_A, 10.0)),
        (f"defrag:{URL_A}/@10", Disruption("defrag", URL_A, 10.0)),
        ("move-leader@300s", Disruption("move-leader", "follower", 300.0)),
        (f"move-leader:{URL_B}@5m", Disruption("move-leader", URL_B, 300.0)),
        ("snapshot@400s", Disruption("snapshot", "leader", 400.0)),
        ("snapshot:follower@.5s", Disruption("snapshot", "follower", 0.5)),
        ("compact@60s", Disruption("compact", "", 60.0)),
        ("compact=1000@60s", Disruption("compact", "", 60.0, value=1000)),
        ("compact=0@60s", Disruption("compact", "", 60.0, value=0)),
        ("kill:follower@500s+30s", Disruption("kill", "follower", 500.0, 30.0)),
        ("kill@1h+1m", Disruption("kill", "leader", 3600.0, 60.0)),
        ("restart:follower@20s", Disruption("restart", "follower", 20.0)),
        ("restart@20s+2s", Disruption("restart", "leader", 20.0, 2.0)),
        ("freeze:leader@700s+10s", Disruption("freeze", "leader", 700.0, 10.0)),
        (" freeze:leader@700s+10s ", Disruption("freeze", "leader", 700.0, 10.0)),
        ("delay@2s+4s=40ms", Disruption("delay", "follower", 2.0, 4.0, PeerRtt(40.0))),
        ("delay:leader@1m+30s=50ms±10ms", Disruption("delay", "leader", 60.0, 30.0, PeerRtt(50.0, 10.0))),
        (f"delay:{URL_A}@5+1.5s=50ms+-10ms", Disruption("delay", URL_A, 5.0, 1.5, PeerRtt(50.0, 10.0))),
        ("delay:follower@2s+4s=250us", Disruption("delay", "follower", 2.0, 4.0, PeerRtt(0.25))),
        ("cut:leader->follower@3s+2s", Disruption("cut", "leader->follower", 3.0, 2.0)),
        ("cut: follower -> leader @3s+2s", Disruption("cut", "follower->leader", 3.0, 2.0)),
        ("cut:follower->follower@3s+2s", Disruption("cut", "follower->follower", 3.0, 2.0)),  # two followers
        (f"cut:{URL_A}/->{URL_B}@1m+30s", Disruption("cut", f"{URL_A}->{URL_B}", 60.0, 30.0)),
        ("add-learner@4s", Disruption("add-learner", "", 4.0)),
        ("add-learner=c@4s", Disruption("add-learner", "", 4.0, value="c")),
    ],
)
def test_each_good_item_parses_to_its_record(item, expected):
    assert parse_item(item) == expected
    assert parse_item(expected.text) == expected  # the canonical form reads back the same


def test_a_schedule_keeps_its_items_in_the_order_given():
    text = "defrag:leader@120s,move-leader@300s,snapshot@400s,kill:follower@500s+30s,freeze:leader@700s+10s,defrag@1s"
    assert [d.text for d in parse_schedule("--etcd-disrupt", text)] == [
        "defrag:leader@120s",
        "move-leader:follower@300s",
        "snapshot:leader@400s",
        "kill:follower@500s+30s",
        "freeze:leader@700s+10s",
        "defrag:leader@1s",
    ]
    assert parse_schedule("--etcd-disrupt", "  ") == ()


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("defrag", "is not an item of the schedule"),
        ("defrag:leader", "is not an item of the schedule"),
        ("reboot@10s", "has an unknown action 'reboot'"),
        ("Defrag@10s", "is not an item of the schedule"),
        ("defrag@", "has no time after '@'"),
        ("defrag@10x", "has no time after '@'"),
        ("defrag@-5s", "has no time after '@'"),
        ("defrag@nan", "has no time after '@'"),
        ("defrag@1e999", "has no time after '@'"),
        ("defrag:boss@10s", "names member 'boss'; defrag takes leader, follower, all, a client URL"),
        ("defrag:127.0.0.1:2379@10s", "names member '127.0.0.1:2379'"),
        ("move-leader:leader@10s", "names member 'leader'; move-leader takes follower, a client URL"),
        ("snapshot:all@10s", "names member 'all'"),
        ("kill:all@10s+5s", "names member 'all'"),
        ("compact:leader@10s", "names a member, but compact acts on the whole cluster"),
        ("promote:leader@10s", "names a member, but promote acts on the whole cluster"),
        ("remove:all@10s", "names member 'all'; remove takes follower, leader, a client URL"),
        ("compact=-1@10s", "has no KEEP after '=': the revisions to keep, a whole number"),
        ("compact=ten@10s", "has no KEEP after '=': the revisions to keep, a whole number"),
        ("compact@10s=5", "has its =KEEP in the wrong place; write compact=KEEP@TIME"),
        (
            "defrag=5@10s",
            "has '=' where only compact=KEEP (the revisions to keep, a whole number), "
            "delay:MEMBER@TIME+DURATION=RTT (a round trip above zero",
        ),
        ("kill@10s+5s=40ms", "has '=' where only compact=KEEP"),
        ("delay@10s+5s", "has no =RTT: delay needs a round trip above zero as --etcd-local-peer-rtt takes it"),
        ("delay:follower@10s=40ms", "has no +DURATION: delay needs how long"),
        ("delay=40ms:follower@10s+5s", "has its =RTT in the wrong place; write delay:MEMBER@TIME+DURATION=RTT"),
        ("delay@10s+5s=40", "has no RTT after '=': a round trip above zero"),
        ("delay@10s+5s=", "has no RTT after '='"),
        ("delay@10s+5s=0ms", "has no RTT after '='"),
        ("delay@10s+5s=11s", "has no RTT after '='"),
        ("delay@10s+5s=10ms±20ms", "has no RTT after '='"),
        ("delay@10s+5s=40ms=1", "has no RTT after '='"),
        ("delay:all@10s+5s=40ms", "names member 'all'; delay takes follower, leader, a client URL"),
        ("delay:0@10s+5s=40ms", "names member '0'"),
        ("defrag@10s+5s", "has a +DURATION, which defrag does not take"),
        ("add-learner@10s+5s", "has a +DURATION, which add-learner does not take"),
        ("kill:follower@10s", "has no +DURATION: kill needs how long"),
        ("freeze@10s", "has no +DURATION: freeze needs how long"),
        ("freeze@10s+0s", "has no duration after '+'"),
        ("freeze@10s+", "has no duration after '+'"),
        ("kill@10s+5q", "has no duration after '+'"),
        ("cut@10s+5s", "names no two members: cut goes from one member to another, cut:A->B@TIME+DURATION"),
        ("cut:leader@10s+5s", "names no two members: cut goes from one member to another"),
        ("cut:leader->@10s+5s", "names no two members"),
        ("cut:leader->follower->leader@10s+5s", "names no two members"),
        ("cut:leader->leader@10s+5s", "names leader on both sides; cut goes from one member to another"),
        (f"cut:{URL_A}->{URL_A}/@10s+5s", f"names {URL_A} on both sides"),
        ("cut:all->leader@10s+5s", "names member 'all'; cut takes leader, follower, a client URL"),
        ("cut:leader->follower@10s", "has no +DURATION: cut needs how long"),
        ("cut:leader->follower@10s+5s=40ms", "has '=' where only compact=KEEP"),
        ("add-learner=@10s", "has no ZONE after '=': a zone's name of --etcd-local-zones"),
        ("add-learner=b!@10s", "has no ZONE after '='"),
    ],
)
def test_each_bad_item_is_refused_in_one_line_with_the_expected_form(item, why):
    with pytest.raises(ScheduleError) as caught:
        parse_item(item)
    message = str(caught.value)
    assert message.startswith(f"--etcd-disrupt: {item!r} {why}")
    assert message.endswith(
        "; expected ACTION[:MEMBER]@TIME[+DURATION] (e.g. defrag:leader@120s, kill:follower@500s+30s, compact=1000@60s)"
    )
    assert "\n" not in message


def test_an_empty_item_is_refused():
    with pytest.raises(ScheduleError, match=r"^--etcd-disrupt: 'defrag@1s,,snapshot@2s' has an empty item"):
        parse_schedule("--etcd-disrupt", "defrag@1s,,snapshot@2s")


@pytest.mark.parametrize(("text", "seconds"), [("120s", 120.0), ("2m", 120.0), ("1.5s", 1.5), ("7", 7.0), ("1h", 3600)])
def test_times(text, seconds):
    assert parse_seconds(text) == seconds


def test_the_option_is_declared_once_and_refuses_through_the_settings():
    assert [o.flag for o in OPTIONS].count("--etcd-disrupt") == 1
    namespace = argparse.Namespace(etcd_disrupt="defrag@10s,kill@20s+5s", etcd_disrupt_allowed=True)
    settings = DisruptionSettings.from_options(namespace)
    assert settings.schedule == (Disruption("defrag", "leader", 10.0), Disruption("kill", "leader", 20.0, 5.0))
    assert settings.allowed is True
    assert DisruptionSettings.defaults().schedule == ()
    with pytest.raises(SettingsError, match=r"^--etcd-disrupt: 'oops@1s' has an unknown action"):
        DisruptionSettings.from_options(argparse.Namespace(etcd_disrupt="oops@1s"))


def test_local_endpoints_take_every_action():
    schedule = parse_schedule("--etcd-disrupt", f"kill:{URL_A}@1s+1s,freeze@2s+1s,defrag:all@3s,compact@4s")
    check_allowed(schedule, [URL_A, URL_B], local=True, allowed=False)


@pytest.mark.parametrize(
    ("items", "refused"),
    [
        ("defrag@1s,kill:follower@5s+3s", "'kill:follower@5s+3s' signals a member's process"),
        ("partition:leader@5s+3s", "'partition:leader@5s+3s' cuts a member's links in the peer proxy"),
        ("delay@5s+3s=40ms", "'delay:follower@5s+3s=40ms' delays a member's links in the peer proxy"),
        ("cut:leader->follower@5s+3s", "'cut:leader->follower@5s+3s' cuts a member's links in the peer proxy"),
    ],
)
def test_local_actions_against_endpoints_the_tool_did_not_start_are_refused_even_when_allowed(items, refused):
    schedule = parse_schedule("--etcd-disrupt", items)
    with pytest.raises(ScheduleError) as caught:
        check_allowed(schedule, [URL_A, URL_B], local=False, allowed=True)
    assert str(caught.value) == (
        f"--etcd-disrupt: {refused}, which only the local etcd the tool starts allows; leave out --etcd-endpoints for "
        "a local cluster, or use defrag, move-leader, snapshot, compact, promote or remove"
    )


def test_other_actions_against_endpoints_the_tool_did_not_start_need_the_allowance():
    schedule = parse_schedule("--etcd-disrupt", "defrag@1s")
    with pytest.raises(ScheduleError, match=r"^--etcd-disrupt: the endpoints given .* pass --etcd-disrupt-allowed"):
        check_allowed(schedule, [URL_A], local=False, allowed=False)
    check_allowed(schedule, [URL_A], local=False, allowed=True)
    check_allowed((), [URL_A], local=False, allowed=False)


def test_a_member_named_by_url_is_among_the_endpoints():
    schedule = parse_schedule("--etcd-disrupt", "defrag:http://10.0.0.9:2379@1s")
    with pytest.raises(ScheduleError, match=r"names http://10.0.0.9:2379, which is not among the endpoints"):
        check_allowed(schedule, [URL_A, URL_B], local=True, allowed=False)


def test_a_follower_needs_more_than_one_member():
    schedule = parse_schedule("--etcd-disrupt", "move-leader@1s")
    with pytest.raises(ScheduleError, match=r"needs a follower, and the cluster has one member"):
        check_allowed(schedule, [URL_A], local=True, allowed=False)


def test_both_members_of_a_cut_are_checked_against_the_endpoints():
    check_allowed(parse_schedule("--etcd-disrupt", f"cut:{URL_A}->leader@1s+1s"), [URL_A, URL_B], True, False)
    schedule = parse_schedule("--etcd-disrupt", "cut:leader->http://10.0.0.9:2379@1s+1s")
    with pytest.raises(ScheduleError, match=r"names http://10.0.0.9:2379, which is not among the endpoints"):
        check_allowed(schedule, [URL_A, URL_B], local=True, allowed=False)
    with pytest.raises(ScheduleError, match=r"'cut:follower->leader@1s\+1s' needs a follower, and the cluster has one"):
        check_allowed(parse_schedule("--etcd-disrupt", "cut:follower->leader@1s+1s"), [URL_A], True, False)
    assert parse_item("cut:leader->follower@1s+1s").members_named == ("leader", "follower")
    assert parse_item("defrag:all@1s").members_named == ("all",) and parse_item("compact@1s").members_named == ()


# a value each action that needs one takes, and what it parses to
NEEDED_VALUES = {"RTT": ("40ms", PeerRtt(40.0))}


@pytest.mark.parametrize("name", list(ACTIONS))
def test_every_action_of_the_table_parses_with_its_default_member_and_its_duration(name):
    action, member = ACTIONS[name], ACTIONS[name].default_member
    if action.names_command:  # no default: the command's name
        name, member = f"{name}:drain", "drain"
    if action.between:  # no default: both members
        name, member = f"{name}:leader->follower", "leader->follower"
    text, value = "", None
    if action.value is not None and action.value.required:
        text, value = NEEDED_VALUES[action.value.name]
        text = f"={text}"
    if action.duration == REQUIRED:
        with pytest.raises(ScheduleError, match=r"has no \+DURATION"):
            parse_item(f"{name}@1s{text}")
    else:
        assert parse_item(f"{name}@1s{text}") == Disruption(action.name, member, 1.0, value=value)
    if action.duration == NONE:
        with pytest.raises(ScheduleError, match="does not take"):
            parse_item(f"{name}@1s+2s{text}")
    else:
        assert parse_item(f"{name}@1s+2s{text}") == Disruption(action.name, member, 1.0, 2.0, value)
    if value is not None:
        with pytest.raises(ScheduleError, match=rf"has no ={action.value.name}: {action.name} needs "):
            parse_item(f"{name}@1s+2s")


def test_a_value_is_where_its_action_writes_it_and_the_help_shows_that_form():
    assert [ACTIONS[name].form for name in ("compact", "delay", "kill", "cut", "add-learner")] == [
        "compact[=KEEP]",
        "delay:MEMBER@TIME+DURATION=RTT",
        "kill",
        "cut:A->B@TIME+DURATION",
        "add-learner[=ZONE]",
    ]
    assert parse_item("compact=5@1s").keep == 5 and parse_item("compact@1s").keep == 0
    assert parse_item("delay@1s+2s=40ms±4ms").text == "delay:follower@1s+2s=40ms±4ms"
