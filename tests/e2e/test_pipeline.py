"""A run in a CI pipeline: the JUnit report of ``--etcd-junit`` and the Markdown of ``$GITHUB_STEP_SUMMARY``, from real
headless runs against a real etcd (the documents themselves, level cases included: ``tests/unit/test_pipeline.py``)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from checks import assert_no_traceback, refusal_line
from support import HEADLESS, free_port, headless_args, read_csv_rows, run_locust

from etcd_users.judging.sla import SLA_EXIT_CODE

pytestmark = pytest.mark.e2e

PASSING, FAILING = "put:p99<5s", "put:p99<1us"


@pytest.fixture(scope="module")
def gated_run(etcd1, tmp_path_factory):
    """One short put run with a gate it meets and one it cannot, a JUnit report and a step summary."""
    out = tmp_path_factory.mktemp("pipeline")
    prefix, junit, summary = out / "run", out / "reports" / "junit.xml", out / "step_summary.md"
    summary.write_text("## an earlier step\n\n")  # GitHub's file is shared by the step's commands: append to it
    args = ("--etcd-cleanup", "--etcd-sla", f"{PASSING},{FAILING}", "--etcd-junit", str(junit), "EtcdPutUser")
    result = run_locust(*headless_args(etcd1, prefix, *args), env={"GITHUB_STEP_SUMMARY": str(summary)}, timeout=90)
    assert_no_traceback(result.stderr)
    put = next(row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Name"] == "put")
    return result, junit, summary, put


@pytest.mark.slow
def test_the_junit_report_has_each_gate_with_one_failure_and_the_exit_code_stays(gated_run):
    result, junit, _, put = gated_run
    assert result.returncode == SLA_EXIT_CODE  # written whether gates fail or not; the exit code is the run's
    assert f"\n    {junit}\n" in result.stderr  # listed with the run's files
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == "locust-etcd"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "0")
    cases = suite.findall("testcase")
    assert [(case.get("classname"), case.get("name")) for case in cases] == [
        ("sla", PASSING),
        ("sla", FAILING),
        ("audit", "audit"),  # the audit of the run's writes, after the gates
    ]
    passing, failing, audit = cases
    assert audit.find("failure") is None and audit.findtext("system-out").startswith("audit: ")
    # the measured value is the run's exact P99 of put, as in PREFIX_latency.csv (ms there, the gate's unit here)
    p99_ms = float(put["P99"])
    measured = {prop.get("name"): prop.get("value") for prop in passing.iter("property")}
    assert float(measured["measured"]) == pytest.approx(p99_ms / 1000, abs=1e-6)
    assert measured["threshold"] == "< 5s"
    assert passing.find("failure") is None and passing.find("skipped") is None
    assert passing.findtext("system-out") == f"SLA put p99 < 5s: {p99_ms / 1000:.6f}s PASS"
    failure = failing.find("failure")
    assert failure.get("message") == f"put p99: measured {p99_ms * 1000:.0f}us, threshold < 1us"
    assert f"SLA put p99 < 1us: {p99_ms * 1000:.0f}us FAIL" in result.stderr  # the same line as the run's log


@pytest.mark.slow
def test_the_step_summary_gets_the_exact_latency_table_and_the_gates(gated_run):
    _, _, summary, put = gated_run
    text = summary.read_text()
    assert text.startswith("## an earlier step\n\n## locust-etcd: ❌ 1 of 2 SLA gates failed\n")
    lines = text.splitlines()
    assert "| Type | Name | Series | # reqs | # fails | P50 | P90 | P99 | P99.9 | Max |" in lines
    figures = " | ".join(put[column] for column in ("Count", "Failures", "P50", "P90", "P99", "P99.9", "Max"))
    assert f"| etcd | put | service | {figures} |" in lines  # the figures of PREFIX_latency.csv and the end table
    assert f"|  | **Aggregated** | service | {figures} |" in lines
    p99_s = float(put["P99"]) / 1000
    assert f"| `{PASSING}` | {p99_s:.6f}s | < 5s | ✅ PASS |" in lines
    assert f"| `{FAILING}` | {p99_s * 1e6:.0f}us | < 1us | ❌ FAIL |" in lines


@pytest.mark.slow
def test_with_worker_processes_only_the_master_reports(etcd1, tmp_out):
    port, junit, summary = free_port(), tmp_out / "junit.xml", tmp_out / "summary.md"
    distributed = ("--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port))
    gates = ("--etcd-cleanup", "--etcd-sla", PASSING, "--etcd-junit", str(junit), "EtcdPutUser")
    # 6 s: on a loaded machine two worker processes may take seconds to open their connections before a first request
    args = headless_args(etcd1, tmp_out / "run", *distributed, "--master-port", str(port), *gates, seconds=6)
    result = run_locust(*args, env={"GITHUB_STEP_SUMMARY": str(summary)}, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    put = next(row for row in read_csv_rows(tmp_out / "run_latency.csv") if row["Name"] == "put")
    text = summary.read_text()
    assert text.count("## locust-etcd") == 1  # the workers append nothing
    assert f"| etcd | put | service | {put['Count']} | {put['Failures']} | {put['P50']} |" in text  # merged figures
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")  # the gate, and the audit of the run's writes


@pytest.mark.slow
def test_an_unwritable_junit_path_is_refused_at_start_in_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    refusals = {
        tmp_path / "a-file" / "junit.xml": f"cannot write '{tmp_path / 'a-file' / 'junit.xml'}' ({tmp_path / 'a-file'} "
        "is a file, not a directory); give a path in a writable directory",
        tmp_path: f"'{tmp_path}' is a directory; give a file path such as reports/junit.xml",
        f"{tmp_path}/new/": f"'{tmp_path}/new/' names a directory; give a file path such as reports/junit.xml",
    }
    for path, why in refusals.items():
        result = run_locust(*HEADLESS, "-u", "1", "-t", "2s", "--etcd-junit", str(path), "EtcdPutUser", timeout=60)
        assert refusal_line(result) == f"locust-etcd: error: --etcd-junit: {why}"
        assert "local etcd" not in result.stderr  # refused before anything was started


# levels of 5 s at 40 and 80 QPS and a 3 s spike at 200 QPS (as tests/e2e/test_shapes.py, shorter)
STEP_SPIKE = (
    "--shape-baseline-qps", "40", "--shape-baseline-time", "5",
    "--shape-step-qps", "40", "--shape-step-time", "5", "--shape-max-qps", "80",
    "--shape-spike-qps", "200", "--shape-spike-time", "3",
    "--etcd-user-rate", "10",
)  # fmt: skip


@pytest.mark.slow
def test_a_shapes_levels_are_cases_with_their_verdicts(etcd1, tmp_out):
    prefix, junit, summary = tmp_out / "steps", tmp_out / "junit.xml", tmp_out / "summary.md"
    # the baseline's 40 QPS (4 users at 10/s) cannot reach qps>50; the run as a whole does
    result = run_locust(
        "-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-cleanup", *STEP_SPIKE,
        "--etcd-sla", "put:p99<5s,qps>50", "--etcd-junit", str(junit), "EtcdPutUser",
        env={"GITHUB_STEP_SUMMARY": str(summary)}, timeout=90,
    )  # fmt: skip
    assert_no_traceback(result.stderr)
    record = json.loads((tmp_out / "steps_shape.json").read_text())
    names = [level["name"] for level in record["levels"]]
    assert names == ["baseline", "step 1", "spike"]
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert [(case.get("classname"), case.get("name")) for case in cases] == [
        ("sla", "put:p99<5s"),
        ("sla", "qps>50"),
        *(("levels", name) for name in names),
        ("audit", "audit"),
    ]
    verdicts = {case.get("name"): case.find("failure") is None for case in cases[2:-1]}
    assert verdicts == {level["name"]: level["verdict"] == "pass" for level in record["levels"]}
    # the baseline's own measured QPS (at most its plan of 40, as fast as this machine got there) as its record says
    [qps_check] = [check for check in record["levels"][0]["checks"] if "qps" in check["gate"]]
    assert not qps_check["passed"] and qps_check["line"] == f"Aggregated qps {qps_check['measured']:.1f}/s < 50"
    baseline = cases[2]
    assert baseline.find("failure").get("message") == f"level 'baseline': {qps_check['line']}"
    failed_gates = [line for line in result.stderr.splitlines() if line.startswith("SLA ") and line.endswith(" FAIL")]
    failed_levels = [level for level in record["levels"] if level["verdict"] == "FAIL"]
    assert cases[-1].find("failure") is None  # the audit
    assert int(suite.get("failures")) == len(failed_gates) + len(failed_levels) >= 1
    lines = summary.read_text().splitlines()
    assert any(line.startswith("| baseline | ❌ FAIL | ") and qps_check["line"] in line for line in lines), lines
