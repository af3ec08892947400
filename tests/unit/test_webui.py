"""The web UI's etcd endpoints table, pure: which member leads, where requests go, when it was checked. The UI
itself, against real members and in a browser, is ``tests/e2e/test_webui.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the test imports etcd_users.reporting.webui)

import argparse

from etcd_users import settings as etcd_options
from etcd_users.reporting.server_metrics import Scrape
from etcd_users.reporting.webui import endpoint_rows
from etcd_users.settings import settings_from_options


def test_endpoint_rows_mark_the_leader_and_where_requests_go():
    namespace = argparse.Namespace(**{option.dest: option.default for option in etcd_options.OPTIONS})
    namespace.etcd_endpoints = "http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379"
    namespace.etcd_target = "leader"
    namespace.etcd_conns = 4
    settings = settings_from_options(namespace)
    follower = Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_has_leader": 1.0})
    leader = Scrape(values={"etcd_server_is_leader": 1.0, "etcd_server_leader_changes_seen_total": 3.0})
    rows = endpoint_rows(settings, [follower, leader, "no answer within 2s"], checked_at=100.0, now=103.4)
    assert [(row["name"], row["role"], row["load"]) for row in rows] == [
        ("http://10.0.0.1:2379", "follower", "no"),
        ("http://10.0.0.2:2379", "leader", "yes"),
        ("http://10.0.0.3:2379", "unreachable (no answer within 2s)", "no"),
    ]
    assert [row["leaderchanges"] for row in rows] == [0, 3, ""]
    assert {row["conns"] for row in rows} == {4} and {row["checked"] for row in rows} == {"3s ago"}
    lost = Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_has_leader": 0.0})
    round_robin = settings_from_options(argparse.Namespace(**{**vars(namespace), "etcd_target": "round-robin"}))
    rows = endpoint_rows(round_robin, [lost, None, leader], checked_at=0.0, now=5.0)
    assert [(row["role"], row["load"], row["checked"]) for row in rows] == [
        ("no leader", "yes (rotation)", ""),
        ("checking", "yes (rotation)", ""),
        ("leader", "yes (rotation)", ""),
    ]
