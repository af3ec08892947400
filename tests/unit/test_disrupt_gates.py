"""``disrupt:`` gates: their grammar in ``--etcd-sla``, the refusal without ``--etcd-disrupt``, and their verdicts on
hand-made windows as the runner records them (pure). A run judged on a real defragmentation is
``tests/e2e/test_disruptions.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the recorder imports Locust)
from locust.env import Environment
from locust.event import Events

import argparse
import xml.etree.ElementTree as ET

import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.features.gates import step_summary
from etcd_users.judging import disruption_gates, junit, sla
from etcd_users.judging.sla_specs import Gate, SlaError, parse_gate, parse_gates, request_gates
from etcd_users.judging.sla_specs import disruption_gates as on_windows
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.settings import SettingsError, settings_from_options

# -- the grammar --

GOOD = [
    ("disrupt:gap<2s", Gate("disrupt:gap<2s", None, "gap", None, "<", 2.0, "s", True)),
    ("disrupt:put:p99<50ms", Gate("disrupt:put:p99<50ms", "put", "percentile", 99.0, "<", 50.0, "ms", True)),
    ("Disrupt: p999 <= 80ms", Gate("Disrupt: p999 <= 80ms", None, "percentile", 99.9, "<=", 80.0, "ms", True)),
    ("disrupt:p99.9<80ms", Gate("disrupt:p99.9<80ms", None, "percentile", 99.9, "<", 80.0, "ms", True)),
    ("disrupt:errors<1%", Gate("disrupt:errors<1%", None, "errors", None, "<", 1.0, "%", True)),
    ("disrupt:put:errors<5", Gate("disrupt:put:errors<5", "put", "errors", None, "<", 5.0, "", True)),
    ("disrupt:*:gap<=500ms", Gate("disrupt:*:gap<=500ms", None, "gap", None, "<=", 500.0, "ms", True)),
]


@pytest.mark.parametrize("text, gate", GOOD, ids=[text for text, _ in GOOD])
def test_disrupt_gates_parse(text, gate):
    assert parse_gate(text) == gate


def test_disrupt_gates_are_labelled_apart_and_left_out_of_the_whole_run_s():
    gates = parse_gates("put:p99<15ms,disrupt:gap<2s,disrupt:put:p99<50ms")
    assert [gate.label for gate in gates] == ["put p99", "disrupt gap", "disrupt put p99"]
    assert request_gates(gates) == gates[:1] and on_windows(gates) == gates[1:]


BAD = [
    ("gap<2s", "'gap<2s' judges a gap, which only a disruption has (write disrupt:gap<2s with --etcd-disrupt)"),
    ("disrupt:p50<10ms", "'disrupt:p50<10ms' asks a disruption for p50 (its cost has p99 and p99.9)"),
    ("disrupt:qps>100", "'disrupt:qps>100' asks a disruption for qps (disrupt: takes gap, p99, p99.9 or errors)"),
    ("disrupt:put:max<1s", "'disrupt:put:max<1s' asks a disruption for max (disrupt: takes gap, p99, p99.9 or errors)"),
    ("disrupt:gap<2", "'disrupt:gap<2' has no unit (latencies take us, ms or s)"),
    ("disrupt:stall<2s", "'disrupt:stall<2s' has an unknown metric 'stall' (gap, p99, p99.9 or errors)"),
    ("disrupt:", "'disrupt:' is not a gate"),
]


@pytest.mark.parametrize("text, why", BAD, ids=[text for text, _ in BAD])
def test_a_malformed_disrupt_gate_is_one_line_naming_it(text, why):
    with pytest.raises(SlaError) as raised:
        parse_gates(f"errors<1%,{text}")
    message = str(raised.value)
    assert message.startswith(f"--etcd-sla: {why}: expected "), message
    assert "\n" not in message


def options(**overrides) -> argparse.Namespace:
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    for dest, value in overrides.items():
        setattr(namespace, dest, value)
    return namespace


def test_a_disrupt_gate_without_a_schedule_is_refused_in_one_line():
    with pytest.raises(SettingsError) as raised:
        settings_from_options(options(etcd_sla="put:p99<15ms,disrupt:gap<2s"))
    assert str(raised.value) == (
        "--etcd-sla: 'disrupt:gap<2s' judges each disruption, and --etcd-disrupt schedules none; add one such as "
        "--etcd-disrupt defrag:leader@60s, or drop the gate"
    )
    settings = settings_from_options(options(etcd_sla="disrupt:gap<2s", etcd_disrupt="move-leader@20s,defrag@10s"))
    assert settings.disruptions.items == ("defrag:leader@10s", "move-leader:follower@20s")  # in the order done


# -- the verdicts, on windows as PREFIX_disruptions.json holds them --


def entry(name: str, gap_s: int, p99_ms, p999_ms, requests: int, errors: int) -> dict:
    return {
        **{"name": name, "gap_s": gap_s, "p99_ms": p99_ms, "p999_ms": p999_ms, "p99_before_ms": 5.0},
        **{"p999_before_ms": 9.0, "requests": requests, "errors": errors, "recovery_s": 0.0},
        "errors_by_label": {},
    }


DEFRAG = {
    "item": "defrag:leader@15s",
    "ok": True,
    "error": "",
    "cost": [entry("put", 0, 776.7, 781.82, 174, 0), entry("range", 1, 12.5, None, 26, 0)],
}
MOVE = {
    "item": "move-leader:follower@25s",
    "ok": True,
    "error": "",
    "cost": [entry("put", 3, 43.74, 45.73, 313, 7), entry("range", 0, None, None, 0, 0)],
}
ITEMS = ("defrag:leader@15s", "move-leader:follower@25s")


def lines(gates: str, items=ITEMS, windows=(DEFRAG, MOVE)) -> list[str]:
    return [result.line() for result in disruption_gates.judge(parse_gates(gates), items, list(windows))]


def test_each_window_is_a_result_line_of_its_own():
    assert lines("disrupt:put:p99<50ms") == [
        "SLA disrupt defrag:leader@15s put p99 < 50ms: 776.700ms FAIL",
        "SLA disrupt move-leader:follower@25s put p99 < 50ms: 43.740ms PASS",
    ]


def test_without_a_name_the_worst_name_is_judged_and_named():
    assert lines("disrupt:gap<2s,disrupt:p99.9<800ms") == [
        "SLA disrupt defrag:leader@15s gap < 2s: 1s (range) PASS",
        "SLA disrupt move-leader:follower@25s gap < 2s: 3s (put) FAIL",
        # range had no success to measure in either window: put's P99.9 is the only one
        "SLA disrupt defrag:leader@15s p99.9 < 800ms: 781.820ms (put) PASS",
        "SLA disrupt move-leader:follower@25s p99.9 < 800ms: 45.730ms (put) PASS",
    ]
    assert lines("disrupt:gap<1500ms")[1] == "SLA disrupt move-leader:follower@25s gap < 1500ms: 3000ms (put) FAIL"


def test_a_gap_to_the_10_ms_is_judged_in_the_gate_s_unit():
    timed = {**MOVE, "cost": [{**entry("put", 0, 43.74, 45.73, 313, 7), "gap_s": 0.12, "gap_ms": 120.0}]}
    assert lines("disrupt:gap<1ms,disrupt:gap<0.5s", items=ITEMS[1:], windows=[timed]) == [
        "SLA disrupt move-leader:follower@25s gap < 1ms: 120ms (put) FAIL",
        "SLA disrupt move-leader:follower@25s gap < 0.5s: 0.12s (put) PASS",
    ]


def test_errors_are_counted_per_name_or_over_every_name():
    assert lines("disrupt:errors<1%,disrupt:put:errors<5") == [
        "SLA disrupt defrag:leader@15s errors < 1%: 0.000% (0 of 200) PASS",
        "SLA disrupt move-leader:follower@25s errors < 1%: 2.236% (7 of 313) FAIL",
        "SLA disrupt defrag:leader@15s put errors < 5: 0 (of 174) PASS",
        "SLA disrupt move-leader:follower@25s put errors < 5: 7 (of 313) FAIL",
    ]


def test_a_disruption_that_did_not_happen_fails_its_gates():
    failed = {**MOVE, "ok": False, "error": "no follower answers", "cost": []}
    assert lines("disrupt:gap<2s", ITEMS + ("snapshot:leader@90s",), (DEFRAG, failed)) == [
        "SLA disrupt defrag:leader@15s gap < 2s: 1s (range) PASS",
        "SLA disrupt move-leader:follower@25s gap < 2s: the action failed: no follower answers FAIL",
        "SLA disrupt snapshot:leader@90s gap < 2s: not reached: the run ended first FAIL",
    ]
    assert lines("disrupt:txn:p99<1s", ITEMS[:1], (DEFRAG,)) == [
        "SLA disrupt defrag:leader@15s txn p99 < 1s: no request named 'txn' in the window FAIL"
    ]
    assert lines("disrupt:range:p99<1s", ITEMS[1:], (MOVE,)) == [
        "SLA disrupt move-leader:follower@25s range p99 < 1s: no successful request in the window FAIL"
    ]


def test_a_failed_window_gives_exit_code_3_and_reaches_junit_and_the_step_summary(tmp_path, caplog):
    gates = parse_gates("disrupt:put:p99<50ms")
    judged = disruption_gates.judge(gates, ITEMS, [DEFRAG, MOVE])
    environment = Environment(events=Events())
    results = sla.judge(environment, LatencyRecorder(environment), gates, judged)
    why = "1 of 1 gates failed (disrupt defrag:leader@15s put p99 < 50ms)"
    assert sla.exit_verdict(results) == (sla.SLA_EXIT_CODE, why) and f"SLA: {why}" in caplog.text
    suite = junit.report(gates, results).getroot().find("testsuite")
    cases = [(case.get("name"), case.find("failure") is not None) for case in suite.iter("testcase")]
    assert cases == [
        ("disrupt:put:p99<50ms defrag:leader@15s", True),
        ("disrupt:put:p99<50ms move-leader:follower@25s", False),
    ]
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase/failure")
    assert failure.get("message") == "disrupt defrag:leader@15s put p99: measured 776.700ms, threshold < 50ms"
    summary = step_summary.markdown([], gates, results)
    assert summary.startswith("## locust-etcd: ❌ 1 of 1 SLA gates failed")
    assert "| `disrupt:put:p99<50ms` defrag:leader@15s | 776.700ms | < 50ms | ❌ FAIL |" in summary
    assert "| `disrupt:put:p99<50ms` move-leader:follower@25s | 43.740ms | < 50ms | ✅ PASS |" in summary
    ET.fromstring(ET.tostring(junit.report(gates, results).getroot()))  # well-formed


def test_request_gates_leave_disrupt_gates_to_their_windows():
    environment = Environment(events=Events())
    gates = parse_gates("disrupt:gap<2s")
    assert sla.evaluate_all(gates, sla.measurements(environment, LatencyRecorder(environment))) == []
