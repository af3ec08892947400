"""exec and ``--etcd-disrupt-command NAME=COMMAND``: each form parses to its words, each refusal is one line that names
the option; an exec always needs ``--etcd-disrupt-allowed``."""

import argparse

import pytest

from etcd_users.features.disruptions.command_match import check_commands, parse_commands
from etcd_users.features.disruptions.options import DisruptionSettings
from etcd_users.features.disruptions.schedule import (
    Disruption,
    ScheduleError,
    check_allowed,
    parse_item,
    parse_schedule,
)
from etcd_users.settings import SettingsError

FLAG = "--etcd-disrupt-command"
URL = "http://127.0.0.1:2379"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("exec:drain@60s", Disruption("exec", "drain", 60.0)),
        ("exec:drain@60s+120s", Disruption("exec", "drain", 60.0, 120.0)),
        ("exec:rolling.upgrade-1_b@2m+20m", Disruption("exec", "rolling.upgrade-1_b", 120.0, 1200.0)),
    ],
)
def test_an_exec_parses_to_its_command_s_name_and_timeout(item, expected):
    assert parse_item(item) == expected
    assert parse_item(expected.text) == expected


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("exec@60s", "names no command: exec takes the NAME of a --etcd-disrupt-command NAME=COMMAND"),
        ("exec:@60s", "is not an item of the schedule"),
        ("exec:a b@60s", "names no command"),
        ("exec=3:drain@60s", "has '=' where only compact=KEEP"),
        ("exec:drain@60s+0s", "has no duration after '+'"),
        ("exec:drain@soon", "has no time after '@'"),
    ],
)
def test_each_bad_exec_is_refused_in_one_line(item, why):
    with pytest.raises(ScheduleError) as caught:
        parse_item(item)
    assert str(caught.value).startswith(f"--etcd-disrupt: {item!r} {why}") and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            ["drain=kubectl drain node-1 --ignore-daemonsets"],
            (("drain", ("kubectl", "drain", "node-1", "--ignore-daemonsets")),),
        ),
        (["fail=sh -c 'exit 3'"], (("fail", ("sh", "-c", "exit 3")),)),
        (["a=true", "b = sleep 1"], (("a", ("true",)), ("b", ("sleep", "1")))),
        (["eq=env A=1 B=2"], (("eq", ("env", "A=1", "B=2")),)),  # only the first '=' ends the name
    ],
)
def test_each_command_parses_to_its_words(values, expected):
    assert parse_commands(FLAG, values) == expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["ls -l"], "--etcd-disrupt-command: 'ls -l' has no NAME= before its command; expected NAME=COMMAND"),
        (["=ls"], "--etcd-disrupt-command: '=ls' has no NAME= before its command"),
        (["a=true", "a=false"], "--etcd-disrupt-command: a is defined twice; give each command a name of its own"),
        (["a="], "--etcd-disrupt-command: 'a=' has an empty command"),
        (["a=   "], "--etcd-disrupt-command: 'a=   ' has an empty command"),
        (["a=echo 'oops"], '--etcd-disrupt-command: "a=echo \'oops" is not a command a shell could split'),
    ],
)
def test_each_bad_command_is_refused_in_one_line(values, message):
    with pytest.raises(ScheduleError) as caught:
        parse_commands(FLAG, values)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_an_exec_names_a_command_defined_and_every_command_is_run():
    defined = parse_commands(FLAG, ["drain=true", "upgrade=true"])
    check_commands(parse_schedule("--etcd-disrupt", "exec:drain@1s,exec:upgrade@2s,exec:drain@3s"), defined)
    with pytest.raises(ScheduleError) as caught:
        check_commands(parse_schedule("--etcd-disrupt", "exec:drian@1s,exec:upgrade@2s"), defined)
    assert str(caught.value) == (
        "--etcd-disrupt: 'exec:drian@1s' names the command 'drian', and the commands defined: drain, upgrade; add "
        "--etcd-disrupt-command 'drian=COMMAND'"
    )
    with pytest.raises(ScheduleError, match=r"'exec:drain@1s' names the command 'drain', and none is defined"):
        check_commands(parse_schedule("--etcd-disrupt", "exec:drain@1s"), ())
    with pytest.raises(ScheduleError) as caught:
        check_commands(parse_schedule("--etcd-disrupt", "exec:drain@1s"), defined)
    assert str(caught.value) == (
        "--etcd-disrupt-command: upgrade is never run; run it with --etcd-disrupt 'exec:upgrade@TIME' or leave it out"
    )


def test_the_settings_refuse_through_settings_error():
    namespace = argparse.Namespace(etcd_disrupt="exec:x@1s+2s", etcd_disrupt_command=["x=sleep 0.5"])
    settings = DisruptionSettings.from_options(namespace)
    assert settings.schedule == (Disruption("exec", "x", 1.0, 2.0),) and settings.command("x") == ("sleep", "0.5")
    assert DisruptionSettings.defaults().commands == ()
    with pytest.raises(SettingsError, match=r"^--etcd-disrupt-command: y is never run"):
        DisruptionSettings.from_options(argparse.Namespace(etcd_disrupt="", etcd_disrupt_command=["y=true"]))


@pytest.mark.parametrize("local", [True, False])
def test_an_exec_always_needs_the_allowance(local):
    schedule = parse_schedule("--etcd-disrupt", "exec:drain@1s")
    with pytest.raises(ScheduleError) as caught:
        check_allowed(schedule, [URL], local=local, allowed=False)
    assert str(caught.value) == (
        "--etcd-disrupt: 'exec:drain@1s' runs a command of your own, outside the tool; pass --etcd-disrupt-allowed to "
        "let it run (on any cluster, the local etcd too)"
    )
    check_allowed(schedule, [URL], local=local, allowed=True)
