"""report.html leads with the answer: for the hand-made step run of test_levels (capacity 100 QPS, first breach at
step 1) the capacity sentence and a row per level with the level's own QPS come first, the whole run's averaged row
later under its own heading; the audit and the disruptions come right after the answer; the charts over time shade
each level; a plain run still opens with its comparison table; another command's verdict can go before everything."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from support import run_analysis as cli

from etcd_users.analysis.charts import LEVEL_BAND_ALPHAS, latency_over_time_figure, qps_over_time_figure
from etcd_users.analysis.levels import level_spans
from etcd_users.analysis.load import load_run
from etcd_users.analysis.measure import measure_run
from etcd_users.analysis.report import Section, write_html
from etcd_users.audit_trail.ledger import KeyCounts
from etcd_users.features.audit.verdict import Audit, Hashes, MemberHash, ProcessAudit
from etcd_users.files import DISRUPTIONS_SCHEMA_VERSION
from unit.test_levels import T0, shape_record, write_run

CAPACITY = (
    "capacity: 100 QPS (baseline) under put:p99<20ms and achieved QPS >= 95 % of planned; "
    "first breach at step 1: put p99 25 ms"
)
LEVELS = ["baseline", "step 1", "step 2", "step 3", "step 4", "spike"]
# all requests per level: put, plus range/serializable's 20 a second in the baseline
ACHIEVED = {"baseline": "120.0", "step 1": "200.0", "step 2": "290.0", "step 3": "0.0", "step 4": "", "spike": ""}


class _Page(HTMLParser):
    """The sections of a report: id, heading, paragraphs and tables (rows of cell texts), outside the SVGs."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict] = []
        self._text: list[str] | None = None
        self._svg = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "svg":
            self._svg += 1
        elif tag == "section":
            self.sections.append({"id": attributes["id"], "title": "", "paragraphs": [], "tables": [], "svg": []})
        elif self.sections and tag == "table":
            self.sections[-1]["tables"].append([])
        elif self.sections and tag == "tr":
            self.sections[-1]["tables"][-1].append([])
        elif tag in ("h2", "p", "td", "th"):
            self._text = []
        if self._svg and self.sections and "id" in attributes:
            self.sections[-1]["svg"].append(attributes["id"])

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg -= 1
        if self._text is None or not self.sections:
            return
        text, section = "".join(self._text).strip(), self.sections[-1]
        if tag == "h2":
            section["title"] = text
        elif tag == "p":
            section["paragraphs"].append(text)
        elif tag in ("td", "th"):
            section["tables"][-1][-1].append(text)
        else:
            return
        self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def sections(page: Path) -> list[dict]:
    text = page.read_text(encoding="utf-8")
    assert text.count("<section ") == text.count("</section>")  # none inside another
    parser = _Page()
    parser.feed(text)
    return parser.sections


def rows(table: list[list[str]]) -> list[dict[str, str]]:
    header, *body = table
    return [dict(zip(header, row, strict=True)) for row in body]


def report(prefix: str, out: Path, *args: str) -> list[dict]:
    result = cli(prefix, "--out", out, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return sections(out / "report.html")


@pytest.fixture
def step_run(tmp_path: Path) -> str:
    return write_run(tmp_path / "steps", shape_record())


def test_a_step_runs_report_opens_with_the_capacity_and_a_row_per_level_with_its_own_qps(step_run, tmp_path):
    found = report(step_run, tmp_path / "report")
    first = found[0]
    assert (first["id"], first["title"]) == ("capacity", "Capacity")
    assert first["paragraphs"][0] == CAPACITY
    [levels] = first["tables"]
    by_level = rows(levels)
    assert [row["level"] for row in by_level] == LEVELS  # one row per level, not one per name
    assert {row["name"] for row in by_level} == {"Aggregated"}
    assert {row["level"]: row["achieved_qps"] for row in by_level} == ACHIEVED
    assert {row["level"]: row["verdict"] for row in by_level} == {
        "baseline": "pass", "step 1": "FAIL", "step 2": "pass", "step 3": "FAIL",
        "step 4": "not measured", "spike": "not measured",
    }  # fmt: skip
    assert {row["level"]: row["planned_qps"] for row in by_level}["step 2"] == "300.0"
    assert first["svg"]  # the chart per level is inlined in the answer

    # the run averaged over every level comes later, under its own heading, and is no level's figure
    titles = [section["title"] for section in found]
    assert titles[:4] == ["Capacity", "Whole run", "Per level, in full", "Errors"]
    whole = found[1]
    assert "figure of no single level" in whole["paragraphs"][0]
    put = next(row for row in rows(whole["tables"][0]) if row["name"] == "put")
    assert put["QPS"] not in {"100.0", "200.0", "290.0"}
    assert len(rows(found[2]["tables"][0])) == len(LEVELS) * 3  # every name per level, in full


def test_the_charts_over_time_shade_each_level_with_its_label(step_run):
    measured = measure_run(load_run(step_run))
    spans = level_spans(load_run(step_run).shape)
    assert [span.label for span in spans] == [
        "warmup · 100 QPS", "baseline · 100 QPS", "step 1 · 200 QPS", "step 2 · 300 QPS", "step 3 · 400 QPS",
        "step 4 · 500 QPS", "spike · 600 QPS",
    ]  # fmt: skip
    # each from its entry to the next level's start, the last to the shape's end
    edges = [edge - T0 for span in spans[1:3] for edge in (span.start, span.end)]
    assert edges == pytest.approx([2.0, 6.2, 6.2, 10.0])
    assert spans[-1].end - T0 == 20.5
    for figure in (latency_over_time_figure([measured]), qps_over_time_figure([measured])):
        for axes in figure.axes:
            bands = [patch for patch in axes.patches if (patch.get_gid() or "").startswith("level-band-")]
            assert len(bands) == len(spans)
            assert [band.get_alpha() for band in bands[:2]] == list(LEVEL_BAND_ALPHAS)  # alternating
            left, right = bands[1].get_window_extent(), bands[2].get_window_extent()
            assert right.x0 == pytest.approx(left.x1, abs=0.5)  # baseline ends where step 1 begins
            assert [text.get_text() for text in axes.texts] == [span.label for span in spans]


def test_the_html_has_the_bands_in_the_latency_chart(step_run, tmp_path):
    found = report(step_run, tmp_path / "report")
    latency = next(section for section in found if section["title"] == "Latency over time")
    bands = [gid for gid in latency["svg"] if gid.startswith("level-band-")]
    assert bands == [f"level-band-{n}" for n in range(1, 8)] * 2  # a panel per request name


def test_the_audit_and_the_disruptions_come_right_after_the_answer(tmp_path):
    prefix = write_run(tmp_path / "steps", shape_record())
    members = (MemberHash("127.0.0.1:2379", 0xABC, 5), MemberHash("127.0.0.1:2381", 0xABC, 5))
    audit = Audit([ProcessAudit("local", KeyCounts(writes=7900, keys=7900))], Hashes(8123, members))
    Path(f"{prefix}_audit.json").write_text(json.dumps(audit.as_json()))
    window = {"item": "kill", "action": "kill", "members": ["127.0.0.1:2381"], "ok": True, "result": ""}
    window |= {"started_at": T0 + 7.5, "finished_at": T0 + 8.5, "cost": []}
    disruptions = {"schema": DISRUPTIONS_SCHEMA_VERSION, "windows": [window]}
    Path(f"{prefix}_disruptions.json").write_text(json.dumps(disruptions))
    found = report(prefix, tmp_path / "report")
    assert [section["id"] for section in found[:4]] == ["capacity", "audit", "disruptions", "whole-run"]
    audited = found[1]
    assert audited["paragraphs"][0] == audit.line()
    assert audited["paragraphs"][0].startswith("audit: 2 members' HashKV equal at rev 8123; 7,900 acknowledged writes")
    [row] = rows(audited["tables"][0])
    assert (row["audit"], row["acknowledged writes"], row["lost"]) == ("pass", "7900", "0")
    disrupted = rows(found[2]["tables"][0])
    assert {(row["disruption"], row["name"]) for row in disrupted} == {("kill", "put"), ("kill", "range/serializable")}


def test_a_failed_audit_says_so_first(tmp_path):
    prefix = write_run(tmp_path / "plain", None)
    audit = Audit([ProcessAudit("local", KeyCounts(writes=100, keys=100, vanished=10))])
    Path(f"{prefix}_audit.json").write_text(json.dumps(audit.as_json()))
    found = report(prefix, tmp_path / "report")
    assert [section["id"] for section in found[:2]] == ["comparison", "audit"]
    assert found[1]["paragraphs"][0].startswith("audit FAILED: HashKV not compared")
    assert found[1]["paragraphs"][1].startswith("audit: 10 acknowledged writes lost")
    assert 'class="answer failed"' in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.parametrize(("content", "said"), [("{", "is not readable JSON"), ('{"x": 1}', "is not an audit record")])
def test_an_unreadable_audit_file_is_a_one_line_error(tmp_path, content, said):
    prefix = write_run(tmp_path / "plain", None)
    Path(f"{prefix}_audit.json").write_text(content)
    result = cli(prefix)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and said in result.stderr, result.stderr


def test_a_plain_run_opens_with_its_comparison_and_draws_no_bands(tmp_path):
    prefix = write_run(tmp_path / "plain", None)
    found = report(prefix, tmp_path / "report")
    assert [section["id"] for section in found[:2]] == ["comparison", "errors"]
    assert rows(found[0]["tables"][0])[0]["run"] == "plain"
    assert not any(gid.startswith("level-band") for section in found for gid in section["svg"])


def test_lead_sections_come_before_the_answer_and_in_the_contents(tmp_path):
    verdict = pd.DataFrame({"figure": ["put P99"], "change": ["+12 %"]})
    answer = Section("Capacity", ("<p>capacity: 100 QPS</p>",), "capacity")
    lead = Section("Verdict", (f"<table><tr><td>{verdict.iloc[0, 0]}</td></tr></table>",))
    page = tmp_path / "report.html"
    write_html(page, "etcd load test comparison", [answer], lead_sections=[lead])
    found = sections(page)
    assert [(section["id"], section["title"]) for section in found] == [
        ("verdict", "Verdict"),
        ("capacity", "Capacity"),
    ]
    text = page.read_text()
    assert re.search(r'<nav class="contents"><a href="#verdict">Verdict</a> · <a href="#capacity">', text)
