"""Results per level of a real scaled step run: each level's row is its own window of the exact files, its verdict
the gate and the keep-up rule on that row's figures, and the capacity lies below the first breach. Which levels fail
depends on the machine; that each verdict follows from its own figures does not. report.html lists the same levels
first."""

from __future__ import annotations

import json
import math

import pytest
from checks import assert_no_traceback, read_hlog
from support import read_csv_rows, run_analysis, run_locust
from unit.test_report import rows as report_rows
from unit.test_report import sections

from etcd_users import hdr
from etcd_users.analysis.client import ADVICE, CLIENT, SCHEDULE, SCHEDULE_ADVICE
from etcd_users.judging.level_verdicts import KEEP_UP

pytestmark = pytest.mark.e2e

NAME = "range/serializable"  # reads: no fsync, so the low levels' latency is the CPU's, not this VM's busy disk
GATE = f"{NAME}:p99<100ms"
GATE_MS = 100.0
# 50 QPS for 6 s, 500 QPS for 6 s, then 600 users at 50/s each (a 30000 QPS spike) for 4 s: usually beyond one Locust
# process, but the checks below hold whichever level fails, if any
STEPS = (
    "--etcd-user-rate", "50", "--etcd-key-space-size", "100",
    "--shape-baseline-qps", "50", "--shape-baseline-time", "6",
    "--shape-step-qps", "450", "--shape-step-time", "6", "--shape-max-qps", "500",
    "--shape-spike-qps", "30000", "--shape-spike-time", "4",
)  # fmt: skip
PERCENTILES = {"p50_ms": 50.0, "p90_ms": 90.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}


@pytest.mark.slow
def test_a_step_run_is_judged_level_by_level_on_each_levels_own_seconds(etcd1, tmp_out):
    prefix = tmp_out / "steps"
    result = run_locust(
        "-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/levels-e2e/", "--etcd-cleanup",
        *STEPS, "--etcd-sla", GATE, "SerializableRangeUser",
        timeout=90,
    )  # fmt: skip
    assert result.returncode in (0, 3), result.stderr[-3000:]  # 3: the whole run's P99 broke the gate
    assert_no_traceback(result.stderr)
    shape = json.loads((tmp_out / "steps_shape.json").read_text())
    assert shape["sla"] == GATE
    for level in shape["levels"]:
        assert level["started_at"] <= level["running_at"], level  # its users were all running, at a known moment

    out = tmp_out / "report"
    analysis = run_analysis(prefix, "--out", out)
    assert analysis.returncode == 0, analysis.stderr
    document = json.loads((out / "levels.json").read_text())
    rows = {row["level"]: row for row in document["runs"][0]["levels"]}
    assert list(rows) == ["baseline", "step 1", "spike"]

    # the oracle: the run's own files, cut by the record's times, read without the analysis package
    first = min(float(row["First"]) for row in read_csv_rows(f"{prefix}_latency.csv") if row["First"])
    history = [row for row in read_csv_rows(f"{prefix}_latency_history.csv") if row["Series"] == "service"]
    intervals = [(start, h) for start, tag, h in read_hlog(f"{prefix}_latency.hlog") if tag.endswith(":service")]
    starts = [level["started_at"] for level in shape["levels"]] + [shape["ended_at"]]
    measured = 0
    for level, end in zip(shape["levels"], starts[1:], strict=True):
        row = rows[level["name"]]
        # the times in the files have millisecond precision: a window that ends at 22.9995 s ends at the 23rd second
        seconds = range(math.ceil(max(level["running_at"], first) - 0.001), math.floor(end + 0.001))
        if not seconds:
            assert row["verdict"] == "not measured", row
            continue
        measured += 1
        assert row["window_s"] == len(seconds)
        assert row["requests"] == sum(int(r["Requests"]) for r in history if int(r["Timestamp"]) in seconds)
        merged = hdr.merge(histogram for start, histogram in intervals if round(start) in seconds)
        for column, percent in PERCENTILES.items():
            assert row[column] == merged.get_value_at_percentile(percent) / 1000, (level["name"], column)
        assert row["max_ms"] == merged.get_max_value() / 1000
        print(f"{level['name']}: {row['achieved_qps']:.1f} QPS, P99 {row['p99_ms']} ms, {row['verdict']}")
    assert measured >= 2

    # each measured level's verdict is the gate and the keep-up rule on its own row
    planned = {level["name"]: level["qps"] for level in shape["levels"]}
    judged = [name for name, row in rows.items() if row["verdict"] != "not measured"]
    for name in judged:
        row = rows[name]
        failed = not row["p99_ms"] < GATE_MS or row["achieved_qps"] < KEEP_UP * planned[name]
        assert row["verdict"].split(" ")[0] == ("FAIL" if failed else "pass"), row
        if failed:  # and a failed level says whether the client limited it
            said = {"client": " (client-bound)", "schedule": " (behind schedule)", "server": ""}
            assert row["bound"] in said and row["verdict"] == "FAIL" + said[row["bound"]], row
    # 600 users against 1: the spike kept the client busier than the baseline did
    if "spike" in judged and "baseline" in judged:
        assert rows["spike"]["client_cpu_pct"] > rows["baseline"]["client_cpu_pct"], (rows["spike"], rows["baseline"])

    # the first breach is the first failing level, the capacity the highest passing level below it
    failing = [name for name in judged if rows[name]["verdict"].startswith("FAIL")]
    breach, capacity = document["first_breach"], document["capacity_qps"]
    if failing:
        assert breach is not None and breach["level"] == failing[0], document["summary"]
        assert breach["planned_qps"] == planned[failing[0]]
        # a passing level may say it measured the load generator ("pass (client-bound)"): it passes all the same
        passed = [name for name in judged[: judged.index(failing[0])] if rows[name]["verdict"].split(" ")[0] == "pass"]
        below = [planned[name] for name in passed]
        assert capacity == (max(below) if below else None), document["summary"]
        assert capacity is None or capacity < breach["planned_qps"]
        assert "first breach at" in document["summary"]
    else:
        assert breach is None and capacity == max(planned[name] for name in judged), document["summary"]
        assert document["summary"].endswith("; no level breached")
    lines = analysis.stdout.splitlines()
    # a level that measured the load generator ends the output with advice: client-bound (add processes) first, else
    # behind its schedule (more users, as a busy machine may leave a level)
    bounds = {row.get("bound") for row in rows.values()}
    advice = ADVICE if CLIENT in bounds else SCHEDULE_ADVICE if SCHEDULE in bounds else None
    assert bool(document["client_bound_levels"]) == (CLIENT in bounds)
    if advice is not None:
        assert lines[-3:] == [document["summary"], "", advice]  # the advice comes last
    else:
        assert lines[-1] == document["summary"] and not any(line.startswith("advice: ") for line in lines)
    assert document["summary"].startswith("capacity: ")

    # report.html opens with that answer: the capacity sentence and a row per level with the level's own QPS
    capacity, *_ = sections(out / "report.html")
    assert capacity["title"] == "Capacity" and capacity["paragraphs"][0] == document["summary"]
    shown = report_rows(capacity["tables"][0])
    assert [row["level"] for row in shown] == list(rows)
    for row in shown:
        achieved = rows[row["level"]]["achieved_qps"]
        assert row["achieved_qps"] == ("" if achieved is None else f"{achieved:.1f}"), row
        assert row["verdict"] == rows[row["level"]]["verdict"], row
