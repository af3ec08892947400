"""SLA gates in headless runs whose exit code and output say PASS or FAIL (the verdicts themselves are
``tests/unit/test_sla.py``, the gate grammar ``tests/unit/test_settings.py``)."""

import pytest
from checks import assert_no_traceback
from support import HEADLESS, headless_args, read_csv_rows, run_locust

from etcd_users.judging.sla import SLA_EXIT_CODE

pytestmark = pytest.mark.e2e


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
    assert "SLA: 1 of 2 gates failed (put p99 < 1us)\n" in result.stderr
    assert "exit code 3: 1 of 2 gates failed (put p99 < 1us) [3]\n" in result.stderr


@pytest.mark.slow
def test_a_malformed_gate_stops_the_run_at_start():
    result = run_locust(*HEADLESS, "-u", "1", "-t", "2s", "--etcd-sla", "put:p99<<15", "EtcdPutUser", timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "locust-etcd: error: --etcd-sla: 'put:p99<<15' is not a gate: expected NAME:METRIC<VALUE such as "
        "put:p99<15ms, p99.9<=10ms, errors<0.1% or qps>1000, or a ready set: kubernetes-etcd"
    ]
    assert "started a local etcd" not in result.stderr  # refused before anything was started
