"""The JUnit report (``reporting.junit``) and the step summary's Markdown (``reporting.step_summary``) built from
given results and shape records; real runs write them in ``tests/e2e/test_pipeline.py``."""

import xml.etree.ElementTree as ET

import pytest

from etcd_users.features.gates import step_summary
from etcd_users.judging import junit
from etcd_users.judging.sla import Result
from etcd_users.judging.sla_specs import parse_gate
from etcd_users.settings import SettingsError

P99, ERRORS, QPS = parse_gate("put:p99<15ms"), parse_gate("errors<0.1%"), parse_gate("qps>1000")
# the levels of a shape's record, as PlannedShape.shape_record() gives them with per-level verdicts
LEVELS = [
    {"name": "warmup", "start_s": 0.0, "end_s": 5.0, "users": 4, "qps": None, "warmup": True, "verdict": None,
     "checks": []},
    {"name": "step 100", "start_s": 5.0, "end_s": 15.0, "users": 10, "qps": 100.0, "verdict": "pass", "checks": [
        {"gate": "put:p99<15ms", "passed": True, "measured": 2.5, "line": "put p99 2.500ms < 15ms"},
        {"gate": "keep-up", "passed": True, "measured": 99.0, "line": "achieved 99.0 QPS >= 95% of planned 100"},
    ]},
    {"name": "spike", "start_s": 15.0, "end_s": 20.0, "users": 300, "qps": 3000.0, "verdict": "FAIL", "checks": [
        {"gate": "put:p99<15ms", "passed": False, "measured": 18.213, "line": "put p99 18.213ms > 15ms"},
        {"gate": "keep-up", "passed": True, "measured": 2990.0, "line": "achieved 2990.0 QPS >= 95% of planned 3000"},
    ]},
]  # fmt: skip


class RecordedShape:
    def __init__(self, levels):
        self.levels = levels

    def shape_record(self) -> dict:
        return {"shape": "StepSpikeShape", "levels": self.levels}


def cases(document: ET.ElementTree) -> dict[tuple[str, str], ET.Element]:
    return {(case.get("classname"), case.get("name")): case for case in document.getroot().iter("testcase")}


def test_gates_are_cases_failed_passed_or_skipped_when_not_judged():
    results = [Result(P99, 18.213, False, "18.213ms"), Result(ERRORS, 0.0, True, "0.000% (0 of 900)")]
    document = junit.report((P99, ERRORS, QPS), results, why_not_judged="no run started")
    suite = document.getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    found = cases(document)
    assert list(found) == [("sla", "put:p99<15ms"), ("sla", "errors<0.1%"), ("sla", "qps>1000")]
    failure = found["sla", "put:p99<15ms"].find("failure")
    assert failure.get("message") == "put p99: measured 18.213ms, threshold < 15ms"
    assert failure.text == "SLA put p99 < 15ms: 18.213ms FAIL"
    passed = found["sla", "errors<0.1%"]
    assert {p.get("name"): p.get("value") for p in passed.iter("property")}["measured"] == "0"
    assert passed.findtext("system-out") == "SLA Aggregated errors < 0.1%: 0.000% (0 of 900) PASS"
    assert found["sla", "qps>1000"].find("skipped").get("message") == "not judged: no run started"


def test_each_level_with_a_verdict_is_a_case_of_its_own():
    document = junit.report((P99,), [Result(P99, 2.5, True, "2.500ms")], junit.recorded_levels(RecordedShape(LEVELS)))
    suite = document.getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    found = cases(document)
    assert list(found)[1:] == [("levels", "warmup"), ("levels", "step 100"), ("levels", "spike")]
    assert found["levels", "warmup"].find("skipped") is not None
    step = found["levels", "step 100"]
    assert step.find("failure") is None and step.get("time") == "10.000"
    properties = {p.get("name"): p.get("value") for p in step.iter("property")}
    assert (properties["put:p99<15ms (ms)"], properties["keep-up (qps)"], properties["verdict"]) == (
        "2.5",
        "99",
        "pass",
    )
    spike = found["levels", "spike"].find("failure")
    assert spike.get("message") == "level 'spike': put p99 18.213ms > 15ms"


def test_a_record_without_verdicts_adds_no_level_cases():
    bare = [{key: value for key, value in level.items() if key not in ("verdict", "checks")} for level in LEVELS]
    assert junit.recorded_levels(RecordedShape(bare)) == []
    assert junit.recorded_levels(object()) == []  # no shape_record at all
    document = junit.report((P99,), [Result(P99, 2.5, True, "2.500ms")], junit.recorded_levels(RecordedShape(bare)))
    assert list(cases(document)) == [("sla", "put:p99<15ms")]


def test_the_report_is_written_whole_and_its_path_checked_first(tmp_path):
    target = tmp_path / "reports" / "junit.xml"
    junit.check_path(str(target))  # makes the directory, leaves no file behind
    assert list(target.parent.iterdir()) == []
    assert junit.write(str(target), junit.report((P99,), []))
    assert ET.parse(target).getroot().find("testsuite").get("skipped") == "1"
    (tmp_path / "file").write_text("")
    with pytest.raises(SettingsError, match=r"^--etcd-junit: cannot write .*; give a path in a writable directory$"):
        junit.check_path(str(tmp_path / "file" / "junit.xml"))
    with pytest.raises(SettingsError, match=r"^--etcd-junit: .* is a directory; give a file path"):
        junit.check_path(str(tmp_path))


def test_the_summary_lists_gates_and_levels_in_markdown():
    results = [Result(P99, 18.213, False, "18.213ms")]
    text = step_summary.markdown([], (P99, QPS), results, LEVELS, "no run started")
    lines = text.splitlines()
    assert lines[0] == "## locust-etcd: ❌ 1 of 2 SLA gates failed"
    assert "| `put:p99<15ms` | 18.213ms | < 15ms | ❌ FAIL |" in lines
    assert "| `qps>1000` | not judged: no run started | > 1000 | skipped |" in lines
    assert "| warmup | not judged |  |" in lines
    assert "| spike | ❌ FAIL | put p99 18.213ms > 15ms; achieved 2990.0 QPS >= 95% of planned 3000 |" in lines


def test_the_summary_is_appended(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("before\n")
    assert step_summary.append("after\n", str(path))
    assert path.read_text() == "before\nafter\n"
    assert not step_summary.append("x", str(tmp_path / "missing" / "summary.md"))  # logged, never raised
