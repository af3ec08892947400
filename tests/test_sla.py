"""SLA gates: the parser and the evaluator (pure), then headless runs whose exit code and output say PASS or FAIL."""

import locust  # noqa: F401  (gevent patching before anything else loads)

import pytest
from checks import assert_no_traceback
from support import HEADLESS, headless_args, read_csv_rows, run_locust

from etcd_users import latency
from etcd_users.options import SettingsError
from etcd_users.sla import SLA_EXIT_CODE, Gate, Measurements, SlaError, evaluate, parse_gate, parse_gates

# -- parsing --

GOOD = [
    ("put:p99<15ms", Gate("put:p99<15ms", "put", "percentile", 99.0, "<", 15.0, "ms")),
    (
        "range/serializable:p99.9<10ms",
        Gate("range/serializable:p99.9<10ms", "range/serializable", "percentile", 99.9, "<", 10.0, "ms"),
    ),
    ("p95<=80ms", Gate("p95<=80ms", None, "percentile", 95.0, "<=", 80.0, "ms")),
    ("*:p99<20ms", Gate("*:p99<20ms", None, "percentile", 99.0, "<", 20.0, "ms")),
    ("put:p999 < 2.5 s", Gate("put:p999 < 2.5 s", "put", "percentile", 99.9, "<", 2.5, "s")),
    ("p9999<800us", Gate("p9999<800us", None, "percentile", 99.99, "<", 800.0, "us")),
    ("txn-put:max<1S", Gate("txn-put:max<1S", "txn-put", "max", None, "<", 1.0, "s")),
    ("mean<2ms", Gate("mean<2ms", None, "mean", None, "<", 2.0, "ms")),
    ("errors<0.1%", Gate("errors<0.1%", None, "errors", None, "<", 0.1, "%")),
    ("put:errors<1%", Gate("put:errors<1%", "put", "errors", None, "<", 1.0, "%")),
    ("errors<=0", Gate("errors<=0", None, "errors", None, "<=", 0.0, "")),
    ("qps>1000", Gate("qps>1000", None, "qps", None, ">", 1000.0, "")),
    ("put:qps>=50/s", Gate("put:qps>=50/s", "put", "qps", None, ">=", 50.0, "")),
]


@pytest.mark.parametrize("text, gate", GOOD, ids=[text for text, _ in GOOD])
def test_gates_parse(text, gate):
    assert parse_gate(text) == gate


def test_the_issue_example_parses_into_three_gates():
    gates = parse_gates("put:p99<15ms,range/serializable:p99.9<10ms,errors<0.1%")
    assert [(gate.label, gate.limit) for gate in gates] == [
        ("put p99", "< 15ms"),
        ("range/serializable p99.9", "< 10ms"),
        ("Aggregated errors", "< 0.1%"),
    ]
    assert parse_gates("") == parse_gates(" , ") == ()


BAD = [
    ("put:p99<<15", "'put:p99<<15' is not a gate"),
    ("put:p99=15ms", "'put:p99=15ms' is not a gate"),
    ("put:p99<", "'put:p99<' is not a gate"),
    ("put:p99<15", "'put:p99<15' has no unit (latencies take us, ms or s)"),
    ("put:p99<15kb", "'put:p99<15kb' has the unit 'kb' (latencies take us, ms or s)"),
    ("put:latency<15ms", "'put:latency<15ms' has an unknown metric 'latency'"),
    ("p101<1ms", "'p101<1ms' asks for percentile 101, outside 0-100"),
    ("errors<5ms", "'errors<5ms' has the unit 'ms' (errors take % for a share, none for a count)"),
    ("errors<150%", "'errors<150%' asks for more than 100% of errors"),
    ("qps>10ms", "'qps>10ms' has the unit 'ms' (qps takes none: requests per second)"),
]


@pytest.mark.parametrize("text, why", BAD, ids=[text for text, _ in BAD])
def test_a_malformed_gate_is_one_line_naming_it(text, why):
    with pytest.raises(SlaError) as raised:
        parse_gates(f"errors<1%,{text}")
    message = str(raised.value)
    assert message.startswith(f"--etcd-sla: {why}")
    assert ": expected NAME:METRIC<VALUE such as put:p99<15ms" in message
    assert "\n" not in message
    assert isinstance(raised.value, SettingsError)  # so the run stops at start with exit code 2


# -- evaluation --


def histogram_of(micros: list[int]):
    histogram = latency.new_histogram()
    for value in micros:
        histogram.record_value(value)
    return histogram


def measurements() -> Measurements:
    """put: 1..1000 us (exact below 2048 us), 1000 requests of which 10 failed; range: 2000 requests, 40 s."""
    return Measurements(
        histograms={"put": histogram_of(list(range(1, 1001))), "range": histogram_of([500] * 1990)},
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


# -- headless runs --


def sla_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("SLA ")]


def put_run(cluster, out, sla: str):
    prefix = out / "run"
    args = ("--etcd-cleanup", "--etcd-sla", sla, "EtcdPutUser")
    result = run_locust(*headless_args(cluster, prefix, *args), timeout=90)
    assert_no_traceback(result.stderr)
    return result, prefix


@pytest.mark.slow
def test_a_run_within_its_gates_exits_0_and_prints_each_gate(etcd1, tmp_out):
    result, prefix = put_run(etcd1, tmp_out, "put:p99<5s,p999<=10s,errors<1%,qps>1")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = sla_lines(result.stderr)
    assert [line.split(":")[0] for line in lines] == [
        "SLA put p99 < 5s",
        "SLA Aggregated p99.9 <= 10s",
        "SLA Aggregated errors < 1%",
        "SLA Aggregated qps > 1",
    ]
    assert all(line.endswith(" PASS") for line in lines), lines
    # the gate measured the same exact histogram as the run's latency file
    put = next(row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Name"] == "put")
    assert lines[0] == f"SLA put p99 < 5s: {float(put['P99']) / 1000:.6f}s PASS"
    total = next(row for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] == "Aggregated")
    assert lines[2] == f"SLA Aggregated errors < 1%: 0.000% (0 of {total['Request Count']}) PASS"
    # requests over the exact window of the latency file (its times are rounded to the millisecond)
    qps = int(total["Request Count"]) / (float(put["Last"]) - float(put["First"]))
    measured = float(lines[3].removeprefix("SLA Aggregated qps > 1: ").removesuffix("/s PASS"))
    assert measured == pytest.approx(qps, rel=0.002)


@pytest.mark.slow
def test_an_impossible_gate_fails_the_run_and_is_named(etcd1, tmp_out):
    result, _ = put_run(etcd1, tmp_out, "put:p99<1us,errors<1%")
    assert result.returncode == SLA_EXIT_CODE == 3
    lines = sla_lines(result.stderr)
    assert len(lines) == 2, result.stderr[-3000:]
    assert lines[0].startswith("SLA put p99 < 1us: ") and lines[0].endswith("us FAIL")
    assert lines[1].startswith("SLA Aggregated errors < 1%: 0.000% (0 of ") and lines[1].endswith(") PASS")
    assert "SLA: 1 of 2 gates failed (put p99 < 1us); exit code 3" in result.stderr


@pytest.mark.slow
def test_a_malformed_gate_stops_the_run_at_start():
    result = run_locust(*HEADLESS, "-u", "1", "-t", "2s", "--etcd-sla", "put:p99<<15", "EtcdPutUser", timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "locust-etcd: error: --etcd-sla: 'put:p99<<15' is not a gate: expected NAME:METRIC<VALUE such as "
        "put:p99<15ms, p99.9<=10ms, errors<0.1% or qps>1000"
    ]
    assert "started a local etcd" not in result.stderr  # refused before anything was started
