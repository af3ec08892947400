"""The web UI's pure parts: the figures' format, the SLA tab's hint and its gates waiting until there is something to
judge, the disruptions' states and costs, the start form's order and ticked class, the alarm above the members. The
endpoints table is ``tests/unit/test_endpoints_tab.py``; the UI itself, against real members and in a browser,
``tests/e2e/test_webui.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the test imports etcd_users.features.webui.tabs)
from locust.env import Environment
from locust.event import Events

import argparse
from types import SimpleNamespace

from etcd_users.core.features import OPTIONS
from etcd_users.features.webui.tabs import (
    DISRUPTIONS_HINT,
    NOT_STARTED,
    SLA_HINT,
    TABLES,
    WAITING,
    WATCHERS_HINT,
    EtcdTabs,
    disruption_rows,
    latency_rows,
    shape_form,
    sla_rows,
    watcher_rows,
)
from etcd_users.judging import disruption_gates
from etcd_users.judging.sla_specs import parse_gates
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import LatencyRow
from etcd_users.run_state.watch_tally import WatchTally
from etcd_users.settings import settings_from_options


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
    etcd = {option.dest: {"default_value": option.default} for option in sorted(OPTIONS, key=str)}
    args = {
        "extra_options": {**shape, **etcd},
        "available_user_classes": ["EtcdDeleteUser", "EtcdPutUser", "EtcdRangeUser"],
        "users": {"EtcdRangeUser": {}, "EtcdDeleteUser": {}, "EtcdPutUser": {}},
    }
    shape_form(args, [])
    order = list(args["extra_options"])
    assert order[:3] == ["etcd_endpoints", "etcd_target", "etcd_sla"]
    rest = [option.dest for option in OPTIONS if option.dest not in order[:3]]
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


ITEMS = ("defrag:leader@15s", "move-leader:follower@25s", "kill:follower@40s+5s", "snapshot:leader@60s")
PUT_COST = {
    **{"name": "put", "gap_s": 0, "p99_ms": 776.7, "p999_ms": 781.82, "p99_before_ms": 77.06},
    **{"p999_before_ms": 155.01, "requests": 174, "errors": 0, "recovery_s": 0.1, "errors_by_label": {}},
}
WINDOWS = [
    {
        **{"item": ITEMS[0], "members": ["http://127.0.0.1:2379"], "started_at": 15.1, "finished_at": 15.9},
        **{"ok": True, "result": "defrag of http://127.0.0.1:2379 took 0.77 s", "error": "", "cost": [PUT_COST]},
    },
    {
        **{"item": ITEMS[1], "members": [], "started_at": 25.0, "finished_at": 25.0, "ok": False},
        **{"result": "", "error": "no follower answers", "cost": []},
    },
    {"item": ITEMS[2], "members": ["http://127.0.0.1:2380"], "started_at": 40.0, "finished_at": None, "ok": None},
]


def test_the_disruptions_tab_shows_each_item_its_state_its_result_and_its_cost():
    rows = disruption_rows(ITEMS, WINDOWS, over=False)
    assert [(row["name"], row["state"], row["members"], row["result"]) for row in rows] == [
        ("defrag:leader@15s", "done", "http://127.0.0.1:2379", "defrag of http://127.0.0.1:2379 took 0.77 s"),
        ("move-leader:follower@25s", "failed", "", "no follower answers"),
        ("kill:follower@40s+5s", "running", "http://127.0.0.1:2380", ""),
        ("snapshot:leader@60s", "waiting", "", ""),
    ]
    assert rows[0]["cost"] == (
        "put: longest gap without a success 0 s, P99 776.70 ms (before 77.06 ms, 10.1x), P99.9 781.82 ms (before "
        "155.01 ms), 0 errors of 174 requests, P99 within 1.2x of before 0.1 s after the end"
    )
    assert rows[1]["cost"] == rows[2]["cost"] == "measuring: known once the P99 is back (at most 30 s after the end)"
    assert rows[3]["cost"] == ""
    assert disruption_rows(ITEMS, WINDOWS[:1], over=True)[3]["state"] == "not reached"
    [hint] = disruption_rows((), [], over=False)
    assert hint["name"] == DISRUPTIONS_HINT and "--etcd-disrupt" in DISRUPTIONS_HINT
    assert "etcd-disruptions" in [table["key"] for table in TABLES]


def test_the_sla_tab_judges_disrupt_gates_on_each_measured_window():
    [gate] = parse_gates("disrupt:put:p99<50ms")
    rows = sla_rows([disruption_gates.judge_window(gate, WINDOWS[0]["item"], WINDOWS[0])])
    assert rows == [{"name": "disrupt defrag:leader@15s put p99 < 50ms", "measured": "776.700ms", "verdict": "FAIL"}]


def test_the_watchers_tab_shows_the_tally_so_far_and_a_hint_before_any_watcher():
    assert watcher_rows(WatchTally()) == [{"name": WATCHERS_HINT, "value": ""}]
    tally = WatchTally(watchers=1_000, events=25_000, progress=3, first=100.0, last=110.0)
    tally.by_response, tally.by_watcher = {0: 980, 2: 19, 7: 1}, {0: 996, 7: 4}
    tally.cancelled = {"etcdserver: watch canceled": 1}
    tally.event_intervals, tally.busy_intervals = 5, 3
    rows = {row["name"]: row["value"] for row in watcher_rows(tally)}
    assert rows == {
        "watchers": "1,000",
        "events": "25,000",
        "events per second": "2,500.0",
        "progress notifications": "3",
        "revisions behind the newest known, per response": "P50 0, P99 2, max 7",
        "watchers that fell behind": "4 (worst 7)",
        "cancelled: etcdserver: watch canceled": "1",
        "client busy": "3 of 5 intervals with events: client-bound",
    }


def _tabs_of_a_run(gates: str, windows: list[dict] | None = None, windows_over: bool = False):
    """The tabs of a web UI whose run has ``gates`` and a schedule of ``ITEMS[:2]``, no request made yet."""
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_endpoints = "http://10.0.0.1:2379"
    namespace.etcd_sla = gates
    namespace.etcd_disrupt = ",".join(ITEMS[:2])
    settings = settings_from_options(namespace)
    environment = Environment(events=Events())
    environment.runner = SimpleNamespace(state="ready")
    recorder = LatencyRecorder(environment)
    tabs = EtcdTabs(environment, recorder, lambda: settings, disruption_windows=lambda: (windows or [], windows_over))
    return tabs, environment


def test_before_a_run_every_gate_is_waiting_not_failed():
    tabs, _ = _tabs_of_a_run("put:p99<15ms,errors<=0,disrupt:gap<5s")
    assert tabs.sla() == [
        {"name": "put p99 < 15ms", "measured": NOT_STARTED, "verdict": WAITING},
        {"name": "Aggregated errors <= 0", "measured": NOT_STARTED, "verdict": WAITING},
        {"name": "disrupt defrag:leader@15s gap < 5s", "measured": "waiting for its disruption", "verdict": WAITING},
        {
            "name": "disrupt move-leader:follower@25s gap < 5s",
            "measured": "waiting for its disruption",
            "verdict": WAITING,
        },
    ]


def test_during_a_run_a_gate_waits_for_a_measure_and_once_over_it_is_judged():
    tabs, environment = _tabs_of_a_run("put:p99<15ms,errors<=0,disrupt:gap<5s", WINDOWS[:1])
    environment.runner.state = "running"
    rows = tabs.sla()
    assert [(row["measured"], row["verdict"]) for row in rows] == [
        ("nothing measured yet (no request named 'put' ran)", WAITING),
        ("0 (of 0)", "PASS"),  # no failure so far: judged on the data so far, as every gate with a measure
        ("0s (put)", "PASS"),  # the first window's cost is known
        ("waiting for its disruption", WAITING),
    ]
    # the second window came, and failed: judged at once, as the run's verdict will
    tabs, environment = _tabs_of_a_run("disrupt:gap<5s", WINDOWS[:2])
    environment.runner.state = "running"
    assert [row["verdict"] for row in tabs.sla()] == ["PASS", "FAIL"]
    # over: a gate without a measure fails, as the run's verdict judges it; an item never reached fails
    tabs, environment = _tabs_of_a_run("put:p99<15ms,disrupt:gap<5s", WINDOWS[:1], windows_over=True)
    environment.runner.state = "stopped"
    assert [(row["measured"], row["verdict"]) for row in tabs.sla()] == [
        ("no request named 'put' ran", "FAIL"),
        ("0s (put)", "PASS"),
        ("not reached: the run ended first", "FAIL"),
    ]
