"""SLA gates: the verdict of each gate against known histograms and counts (pure). The gate grammar is
``tests/unit/test_settings.py``; headless runs that exit on a verdict are ``tests/e2e/test_sla.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the recorder imports Locust)
from locust.env import Environment
from locust.event import Events

from checks import recorded

from etcd_users.judging import sla
from etcd_users.judging.sla import Measurements, evaluate, evaluate_all
from etcd_users.judging.sla_specs import parse_gate, parse_gates
from etcd_users.latency import store as latency_store
from etcd_users.latency.recorder import LatencyRecorder


def measurements() -> Measurements:
    """put: 1..1000 us (exact below 2048 us), 1000 requests of which 10 failed; range: 2000 requests, 40 s."""
    return Measurements(
        histograms={"put": recorded(range(1, 1001)), "range": recorded([500] * 1990)},
        requests={"put": 1000, "range": 2000},
        failures={"put": 10, "range": 0},
        duration_s=40.0,
    )


def line(text: str) -> str:
    return evaluate(parse_gate(text), measurements()).line()


def test_latency_gates_read_the_exact_histograms():
    assert line("put:p99<15ms") == "SLA put p99 < 15ms: 0.990ms PASS"
    assert line("put:p99.9<999us") == "SLA put p99.9 < 999us: 999us FAIL"
    assert line("put:p99.9<=999us") == "SLA put p99.9 <= 999us: 999us PASS"
    assert line("put:max<1ms") == "SLA put max < 1ms: 1.000ms FAIL"
    assert line("put:mean<0.5ms") == "SLA put mean < 0.5ms: 0.500ms FAIL"  # 500.5 us
    assert line("put:p50>=0.5ms") == "SLA put p50 >= 0.5ms: 0.500ms PASS"
    assert line("put:p99<1us") == "SLA put p99 < 1us: 990us FAIL"
    assert line("put:p99<1s") == "SLA put p99 < 1s: 0.000990s PASS"


def test_aggregate_gates_merge_every_name():
    # 2990 values: 1990 at 500 us, then 1..1000 us; P99 lies in the top 30 of the put values
    assert line("p99<1ms") == "SLA Aggregated p99 < 1ms: 0.970ms PASS"
    assert line("*:p50<=500us") == "SLA Aggregated p50 <= 500us: 500us PASS"


def test_error_and_qps_gates_read_the_request_counts():
    assert line("errors<0.1%") == "SLA Aggregated errors < 0.1%: 0.333% (10 of 3000) FAIL"
    assert line("errors<1%") == "SLA Aggregated errors < 1%: 0.333% (10 of 3000) PASS"
    assert line("put:errors<1%") == "SLA put errors < 1%: 1.000% (10 of 1000) FAIL"
    assert line("range:errors<=0") == "SLA range errors <= 0: 0 (of 2000) PASS"
    assert line("qps>75") == "SLA Aggregated qps > 75: 75.0/s FAIL"
    assert line("put:qps>=25") == "SLA put qps >= 25: 25.0/s PASS"


def test_a_gate_on_a_name_that_never_ran_fails():
    assert line("get:p99<1s") == "SLA get p99 < 1s: no request named 'get' ran FAIL"
    assert line("get:errors<1%") == "SLA get errors < 1%: no request named 'get' ran FAIL"
    empty = Measurements({}, {}, {}, 0.0)
    assert evaluate(parse_gate("p99<1s"), empty).line() == "SLA Aggregated p99 < 1s: no successful request FAIL"
    assert evaluate(parse_gate("errors<1%"), empty).line() == "SLA Aggregated errors < 1%: no requests FAIL"
    assert evaluate(parse_gate("qps>1"), empty).line() == "SLA Aggregated qps > 1: no requests FAIL"


def test_only_failed_requests_means_no_latency_to_judge():
    data = Measurements({}, {"put": 5}, {"put": 5}, 2.0)
    assert evaluate(parse_gate("put:p99<1s"), data).line() == "SLA put p99 < 1s: no successful request FAIL"


def test_gates_are_judged_in_their_order():
    gates = parse_gates("qps>1,put:p50<=0.5ms,get:p99<1s")
    assert [result.line() for result in evaluate_all(gates, measurements())] == [
        "SLA Aggregated qps > 1: 75.0/s PASS",
        "SLA put p50 <= 0.5ms: 0.500ms PASS",
        "SLA get p99 < 1s: no request named 'get' ran FAIL",
    ]


# -- judging a run: the recorder's histograms, Locust's counts, the exit code --


def judged_run(monkeypatch) -> tuple[Environment, LatencyRecorder]:
    """100 puts of 0.1-1.0 ms (ten of each) under two request types, then one failed put, over 10 s."""
    now = [1_700_000_000.0]
    monkeypatch.setattr(latency_store, "_now", lambda: now[0])
    environment = Environment(events=Events())
    recorder = LatencyRecorder(environment)
    for index in range(100):
        now[0] = 1_700_000_000.0 + index * 0.1
        request_type = "etcd" if index % 2 else "grpc"  # one name under two types is judged as one
        recorder.record(request_type, "put", (index % 10 + 1) / 10)
        environment.stats.log_request(request_type, "put", 1, 0)
    now[0] = 1_700_000_010.0
    recorder.record("etcd", "put", 900.0, exception="boom")
    environment.stats.log_request("etcd", "put", 900, 0)
    environment.stats.log_error("etcd", "put", "boom")
    return environment, recorder


def test_a_run_whose_gates_pass_gives_no_verdict(monkeypatch):
    environment, recorder = judged_run(monkeypatch)
    data = sla.measurements(environment, recorder)
    assert (set(data.histograms), data.requests, data.failures, data.duration_s) == (
        {"put"},
        {"put": 101},
        {"put": 1},
        10.0,
    )
    assert data.histograms["put"].get_total_count() == 100
    results = sla.judge(environment, recorder, parse_gates("put:p50<=0.5ms,p99<=1ms,errors<1%,qps>=10"))
    assert [result.line() for result in results] == [
        "SLA put p50 <= 0.5ms: 0.500ms PASS",
        "SLA Aggregated p99 <= 1ms: 1.000ms PASS",
        "SLA Aggregated errors < 1%: 0.990% (1 of 101) PASS",
        "SLA Aggregated qps >= 10: 10.1/s PASS",
    ]
    assert sla.exit_verdict(results) is None and environment.process_exit_code is None  # decided once, elsewhere


def test_a_failed_gate_gives_exit_code_3_and_names_it(monkeypatch, caplog):
    environment, recorder = judged_run(monkeypatch)
    results = sla.judge(environment, recorder, parse_gates("put:p99<1ms,errors<=0"))
    assert [result.line() for result in results] == [
        "SLA put p99 < 1ms: 1.000ms FAIL",
        "SLA Aggregated errors <= 0: 1 (of 101) FAIL",
    ]
    assert sla.exit_verdict(results) == (3, "2 of 2 gates failed (put p99 < 1ms, Aggregated errors <= 0)")
    assert "SLA: 2 of 2 gates failed (put p99 < 1ms, Aggregated errors <= 0)" in caplog.text
