"""The web UI's pure parts: the endpoints table (which member leads, where requests go, when it was checked, leader
changes since the run started), the figures' format, the SLA tab's hint, the start form's order and ticked class. The
UI itself, against real members and in a browser, is ``tests/e2e/test_webui.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the test imports etcd_users.reporting.webui)

import argparse
from types import SimpleNamespace

from etcd_users import settings as etcd_options
from etcd_users.latency.store import LatencyRow
from etcd_users.reporting.server_metrics import Scrape
from etcd_users.reporting.webui import (
    SLA_HINT,
    TABLES,
    EtcdTabs,
    endpoint_rows,
    latency_rows,
    leader_changes,
    shape_form,
    sla_rows,
)
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


def test_leader_changes_count_from_the_run_s_start_not_the_first_election():
    namespace = argparse.Namespace(**{option.dest: option.default for option in etcd_options.OPTIONS})
    namespace.etcd_endpoints = "http://10.0.0.1:2379,http://10.0.0.2:2379"
    settings = settings_from_options(namespace)
    urls = ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]

    def scrape(changes: float) -> Scrape:
        return Scrape(values={"etcd_server_is_leader": 0.0, "etcd_server_leader_changes_seen_total": changes})

    def shown(scrapes: list, baselines: dict[str, float]) -> list:
        return [row["leaderchanges"] for row in endpoint_rows(settings, scrapes, 0.0, 0.0, baselines)]

    baselines: dict[str, float] = {}
    leader_changes([scrape(1.0), "no answer"], baselines, urls)  # a fresh cluster: its first election, and a miss
    assert baselines == {urls[0]: 1.0}
    assert shown([scrape(1.0), "no answer"], baselines) == [0, ""]
    leader_changes([scrape(3.0), scrape(2.0)], baselines, urls)  # the first keeps its baseline, the second gets one
    assert shown([scrape(3.0), scrape(2.0)], baselines) == [2, 0]
    leader_changes([scrape(1.0), scrape(2.0)], baselines, urls)  # the first member restarted: counts from there
    assert baselines == {urls[0]: 1.0, urls[1]: 2.0}
    assert TABLES[1]["structure"][4] == {"key": "leaderchanges", "title": "Leader changes since the run started"}


def test_latencies_show_three_decimals_and_an_empty_sla_tab_says_how_to_add_gates():
    rows = latency_rows([LatencyRow("etcd", "put", "service", 3, 0, 0.1, 0.5, 1.95, 2.0, 2.1, 4.251, 5.0, 5.0, 6.0)])
    assert {key: rows[0][key] for key in ("p50", "p90", "p99", "p999", "max")} == {
        "p50": "1.950",
        "p90": "2.000",
        "p99": "4.251",
        "p999": "5.000",
        "max": "6.000",
    }
    [hint] = sla_rows([])
    assert hint["name"] == SLA_HINT and "--etcd-sla" in SLA_HINT and "put:p99<15ms" in SLA_HINT


def test_the_form_lists_etcd_options_first_in_order_and_ticks_one_class():
    shape = {dest: {"default_value": 1} for dest in ("shape_seed", "shape_ladder")}
    etcd = {option.dest: {"default_value": option.default} for option in sorted(etcd_options.OPTIONS, key=str)}
    args = {
        "extra_options": {**shape, **etcd},
        "available_user_classes": ["EtcdDeleteUser", "EtcdPutUser", "EtcdRangeUser"],
        "users": {"EtcdRangeUser": {}, "EtcdDeleteUser": {}, "EtcdPutUser": {}},
    }
    shape_form(args, [])
    order = list(args["extra_options"])
    assert order[:3] == ["etcd_endpoints", "etcd_target", "etcd_sla"]
    rest = [option.dest for option in etcd_options.OPTIONS if option.dest not in order[:3]]
    assert order == order[:3] + rest + ["shape_seed", "shape_ladder"]
    assert args["available_user_classes"] == ["EtcdPutUser"]  # the page ticks these
    assert list(args["users"]) == ["EtcdDeleteUser", "EtcdPutUser", "EtcdRangeUser"]  # and lists these
    args["available_user_classes"] = ["EtcdDeleteUser", "EtcdPutUser", "EtcdRangeUser"]
    shape_form(args, ["EtcdRangeUser", "Gone"])  # the classes named on the command line
    assert args["available_user_classes"] == ["EtcdRangeUser"]


def test_a_nospace_alarm_is_the_first_row_of_the_endpoints_tab():
    alarm = "NOSPACE alarm on http://127.0.0.1:2379: etcd refuses every write (mvcc: database space exceeded)"
    raised: list[str | None] = [None]
    tabs = EtcdTabs(
        SimpleNamespace(parsed_options=None), recorder=None, run_settings=lambda: None, alarm=lambda: raised[0]
    )
    assert tabs.endpoints() == []  # no run yet, no alarm
    raised[0] = alarm
    assert tabs.endpoints() == [
        {"name": "ALARM", "role": alarm, "load": "", "conns": "", "leaderchanges": "", "checked": ""}
    ]
