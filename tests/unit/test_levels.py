"""Results per level of a shape's run (analysis.levels) against a hand-made run whose answers are known.

The run (T0 = 1700000000, written with etcd_users.latency's own writer): a warm-up, then levels whose windows are
[running_at, next level's start), so that the seconds of ramps and of level changes belong to no level:

    level      planned  started  running  end    whole seconds  put per second              verdict (put:p99<20ms)
    warmup     100 QPS  +0.0     +0.3     +2.0   (left out)     100 x 50 ms
    (ramp)                                       2              50 x 30 ms
    baseline   100 QPS  +2.0     +2.4     +6.2   3, 4, 5        97 x 1 ms, 2 x 5, 1 x 9     pass
    (change)                                     6              150 x 40 ms
    step 1     200 QPS  +6.2     +7.0     +10.0  7, 8, 9        196 x 2 ms, 4 x 25          FAIL (p99 25 ms)
    (ramp)                                       10             250 x 30 ms
    step 2     300 QPS  +10.0    +10.6    +14.0  11, 12, 13     290 x 1 ms                  pass (96.7 % of planned)
    step 3     400 QPS  +14.0    +14.2    +17.0  15, 16         none                        FAIL (0 QPS)
    step 4     500 QPS  +17.0    never    +19.0  -              50 x 3 ms at 17, 18         not measured
    spike      600 QPS  +19.0    +19.6    +20.5  -              60 x 3 ms at 19             not measured (no second)

range/serializable runs in the baseline only (20 x 0.5 ms per second). One put of second 4 failed with
"etcdserver: too many requests", recorded by the shape in the baseline's errors.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pandas as pd
import pytest
from checks import recorded
from hdrh.histogram import HdrHistogram
from support import run_analysis as cli

from etcd_users import hdr
from etcd_users.analysis.hlog import merge_window, merge_windows
from etcd_users.analysis.levels import (
    FAIL,
    NOT_JUDGED,
    NOT_MEASURED,
    PASS,
    Check,
    LevelResult,
    LevelWindow,
    capacity_and_breach,
    judge,
    level_windows,
    measure_levels,
    spawn_seconds,
)
from etcd_users.analysis.load import load_run
from etcd_users.analysis.measure import measure_run
from etcd_users.files import AGGREGATED, ETCD_METRICS_COLUMNS, SERVICE, HlogKey
from etcd_users.judging.sla import Measurements
from etcd_users.judging.sla_specs import parse_gates
from etcd_users.latency.store import SealedInterval, summary_row
from etcd_users.latency.writer import LatencyFiles

T0 = 1_700_000_000
PUT = {
    0: {50_000: 100},
    1: {50_000: 100},
    2: {30_000: 50},
    3: {1_000: 97, 5_000: 2, 9_000: 1},
    4: {1_000: 96, 5_000: 2, 9_000: 1},  # and one failure
    5: {1_000: 97, 5_000: 2, 9_000: 1},
    6: {40_000: 150},
    7: {2_000: 196, 25_000: 4},
    8: {2_000: 196, 25_000: 4},
    9: {2_000: 196, 25_000: 4},
    10: {30_000: 250},
    11: {1_000: 290},
    12: {1_000: 290},
    13: {1_000: 290},
    17: {3_000: 50},
    18: {3_000: 50},
    19: {3_000: 60},
}
STEPS_3_TO_SPIKE = ("step 3", "step 4", "spike")
RANGE = {second: {500: 20} for second in (3, 4, 5)}
FAILURES = {("put", 4): 1}
TOO_MANY = "EtcdError('etcdserver: too many requests')"


def level(name, qps, started, running, warmup=False, errors=None, **extra) -> dict:
    users = qps // 10
    record = {"name": name, "start_s": 0.0, "end_s": 0.0, "users": users, "qps": float(qps), "spawn_rate": 10.0}
    record |= {"warmup": warmup, "started_at": None if started is None else T0 + started}
    record |= {"running_at": None if running is None else T0 + running, "errors": errors}
    return record | extra


def shape_record(sla: str | None = "put:p99<20ms") -> dict:
    return {
        "shape": "StepSpikeShape",
        "started_at": T0,
        "warmup_end": T0 + 2.0,
        "ended_at": T0 + 20.5,
        "user_rate": 10.0,
        "sla": sla,
        "levels": [
            level("warmup", 100, 0.0, 0.3, warmup=True, errors=[]),
            level("baseline", 100, 2.0, 2.4, errors=[{"name": "put", "error": TOO_MANY, "occurrences": 1}]),
            level("step 1", 200, 6.2, 7.0, errors=[]),
            level("step 2", 300, 10.0, 10.6, errors=[]),
            level("step 3", 400, 14.0, 14.2, errors=[]),
            level("step 4", 500, 17.0, None),
            level("spike", 600, 19.0, 19.6),
        ],
    }


def write_run(prefix: Path, shape: dict | None, metrics: bool = False) -> str:
    """The exact files of the run through etcd_users.latency's writer, its shape record, optionally /metrics polls."""
    intervals, totals, failures = [], {}, {}
    for name, spec in (("put", PUT), ("range/serializable", RANGE)):
        for second in sorted(set(spec) | {s for (n, s) in FAILURES if n == name}):
            histogram = hdr.new_histogram()
            for value_us, count in spec.get(second, {}).items():
                histogram.record_value(value_us, count)
            failed = FAILURES.get((name, second), 0)
            intervals.append(SealedInterval(T0 + second, ("etcd", name, SERVICE), histogram, failed))
            totals[name] = hdr.add(totals.get(name), histogram)
            failures[name] = failures.get(name, 0) + failed
    intervals.sort(key=lambda interval: interval.second)
    files = LatencyFiles(str(prefix), T0)
    files.append(intervals)
    rows = [summary_row(("etcd", name, SERVICE), totals[name], failures[name]) for name in totals]
    files.write_summary(rows, T0 + 0.1, T0 + 20.4)
    files.close()
    if shape is not None:
        Path(f"{prefix}_shape.json").write_text(json.dumps(shape))
    if metrics:  # one member polled every second: fsync P99 = the second, RSS + 1 MB/s
        lines = [",".join(ETCD_METRICS_COLUMNS)]
        for second in range(21):
            values = dict.fromkeys(ETCD_METRICS_COLUMNS, "")
            values |= {"Timestamp": f"{T0 + second:.3f}", "Member": "http://127.0.0.1:2379", "IsLeader": "1"}
            values |= {"LeaderChanges": "1", "ProposalsCommitted": "1", "ProposalsApplied": "1", "DbSizeBytes": "1"}
            values |= {"RssBytes": str(100_000_000 + second * 1_000_000), "CpuSeconds": "1"}
            values |= {"FsyncP99Ms": "" if second == 0 else f"{second:.3f}"}
            lines.append(",".join(values[column] for column in ETCD_METRICS_COLUMNS))
        Path(f"{prefix}_etcd_metrics.csv").write_text("\n".join(lines) + "\n")
    return str(prefix)


@pytest.fixture
def run_prefix(tmp_path: Path) -> str:
    return write_run(tmp_path / "steps", shape_record(), metrics=True)


def levels_of(prefix: str, **options):
    return measure_levels(measure_run(load_run(prefix)), **options)


def rows_by(result, name: str = "put") -> dict[str, dict]:
    return {level.window.name: next(row for row in level.rows if row["name"] == name) for level in result.levels}


def oracle(spec: dict, seconds) -> HdrHistogram:
    """The samples of those seconds recorded one at a time by hdrh itself."""
    return recorded(value for s in seconds for value, count in spec.get(s, {}).items() for _ in range(count))


# --- windows ------------------------------------------------------------------------------------------------------


def test_each_window_runs_from_its_users_all_running_to_the_next_level_start():
    windows = {window.name: window for window in level_windows(shape_record())}
    assert windows["warmup"].warmup
    baseline = windows["baseline"]
    assert (baseline.start, baseline.end) == (T0 + 2.4, T0 + 6.2)
    assert list(baseline.seconds) == [T0 + 3, T0 + 4, T0 + 5]  # not 2 (ramp) nor 6 (the change to step 1)
    assert list(windows["step 1"].seconds) == [T0 + 7, T0 + 8, T0 + 9]  # running on the second: 7 is in
    assert list(windows["step 3"].seconds) == [T0 + 15, T0 + 16]
    assert windows["step 4"].start is None and "never all running" in windows["step 4"].missing
    assert windows["spike"].end is None and "no whole second" in windows["spike"].missing  # +19.6 to +20.5
    assert not any(window.estimated for window in windows.values())


def test_a_skipped_level_ends_the_one_before_at_the_next_entered_level_and_the_run_end_ends_the_last():
    record = shape_record()
    record["levels"][3]["started_at"] = record["levels"][3]["running_at"] = None  # step 2 never entered
    record["ended_at"] = None  # interrupted: the last request ends the last level
    windows = {window.name: window for window in level_windows(record, run_end=T0 + 22.0)}
    assert windows["step 1"].end == T0 + 14.0
    assert "never entered" in windows["step 2"].missing
    assert windows["spike"].end == T0 + 22.0 and list(windows["spike"].seconds) == [T0 + 20, T0 + 21]


def test_an_older_record_gets_an_estimated_start_and_no_window_starts_before_a_cut_or_the_first_request():
    record = shape_record()
    for entry in record["levels"]:
        del entry["running_at"]
    record["levels"][2]["spawn_rate"] = 4.0
    windows = {window.name: window for window in level_windows(record)}
    # baseline: 10 users already running from the warm-up; step 1: +10 users in batches of 4 at 0 s, 1 s and 2 s;
    # step 2: +10 users at 10/s, one batch at once
    assert windows["baseline"].start == T0 + 2.0 and windows["baseline"].estimated
    assert windows["step 1"].start == pytest.approx(T0 + 8.2)
    assert windows["step 2"].start == T0 + 10.0
    cut = {window.name: window for window in level_windows(shape_record(), cut_s=T0 + 4.0)}
    assert list(cut["baseline"].seconds) == [T0 + 4, T0 + 5]
    # users spawned but still in on_start (connecting, filling the read key space) send nothing yet
    late = {window.name: window for window in level_windows(shape_record(), first_request=T0 + 3.5)}
    assert list(late["baseline"].seconds) == [T0 + 4, T0 + 5] and late["baseline"].running_at == T0 + 2.4
    assert list(late["step 1"].seconds) == [T0 + 7, T0 + 8, T0 + 9]


def test_spawn_seconds_follow_locusts_batches():
    assert spawn_seconds(20, 20.0) == 0.0  # one batch, at once
    assert spawn_seconds(10, 4.0) == 2.0  # 4, 4, 2: batches at 0, 1 and 2 s
    assert spawn_seconds(-100, 100.0) == 0.0  # stopping users is dispatched the same way
    assert spawn_seconds(3, 0.5) == 4.0  # 1 user every 2 s
    assert spawn_seconds(5, None) == 0.0


def test_the_window_reader_merges_only_intervals_wholly_inside(run_prefix: str):
    path = Path(run_prefix + "_latency.hlog")
    key = HlogKey("etcd", "put", SERVICE)
    inside = merge_window(path, T0 + 2.4, T0 + 6.2)[key]
    assert inside.get_total_count() == 299  # seconds 3-5: 300 requests, one failed
    assert inside.get_max_value() == oracle(PUT, range(3, 6)).get_max_value()
    first, overlapping, empty = merge_windows(path, [(T0 + 2.4, T0 + 6.2), (T0 + 3.0, T0 + 5.0), (T0 + 15, T0 + 17)])
    assert first[key].get_total_count() == 299
    assert overlapping[key].get_total_count() == 199  # seconds 3 and 4, also in the first window
    assert empty == {}


# --- measurements -------------------------------------------------------------------------------------------------


def test_level_rows_count_the_window_seconds_and_merge_their_histograms(run_prefix: str):
    result = levels_of(run_prefix)
    assert [level.window.name for level in result.levels] == [*("baseline", "step 1", "step 2"), *STEPS_3_TO_SPIKE]
    put = rows_by(result)
    baseline = put["baseline"]
    assert (baseline["window_s"], baseline["requests"], baseline["failures"]) == (3.0, 300, 1)
    assert baseline["achieved_qps"] == 100.0 and baseline["planned_qps"] == 100.0 and baseline["planned_users"] == 10
    assert baseline["error_pct"] == pytest.approx(100 / 300)
    expected = oracle(PUT, range(3, 6))
    for column, percent in (("p50_ms", 50), ("p90_ms", 90), ("p95_ms", 95), ("p99_ms", 99), ("p999_ms", 99.9)):
        assert baseline[column] == expected.get_value_at_percentile(percent) / 1000, column
    assert baseline["max_ms"] == pytest.approx(9.0, rel=1e-3) and baseline["source"] == "exact"
    assert baseline["top_errors"] == "etcdserver: too many requests ×1"
    step1 = put["step 1"]
    assert step1["requests"] == 600 and step1["p99_ms"] == oracle(PUT, range(7, 10)).get_value_at_percentile(99) / 1000
    assert step1["p99_ms"] > 20 and step1["max_ms"] == pytest.approx(25.0, rel=1e-3)
    assert put["step 2"]["achieved_qps"] == 290.0 and put["step 2"]["max_ms"] == pytest.approx(1.0, rel=1e-3)


def test_the_all_requests_row_merges_the_names(run_prefix: str):
    result = levels_of(run_prefix)
    baseline = rows_by(result, AGGREGATED)["baseline"]
    assert (baseline["requests"], baseline["achieved_qps"]) == (360, 120.0)
    both = recorded(
        value
        for spec in (PUT, RANGE)
        for s in range(3, 6)
        for value, count in spec.get(s, {}).items()
        for _ in range(count)
    )
    assert baseline["p50_ms"] == both.get_value_at_percentile(50) / 1000
    assert baseline["top_errors"] == "etcdserver: too many requests ×1"
    step1_range = rows_by(result, "range/serializable")["step 1"]
    assert (step1_range["requests"], step1_range["p99_ms"], step1_range["top_errors"]) == (0, None, "")


def test_a_level_with_no_requests_and_levels_without_a_window(run_prefix: str):
    put = rows_by(levels_of(run_prefix))
    step3 = put["step 3"]
    assert (step3["window_s"], step3["requests"], step3["achieved_qps"], step3["p99_ms"]) == (2.0, 0, 0.0, None)
    assert step3["verdict"] == FAIL and "0.0 QPS, 0.0 % of planned 400" in step3["breaches"]
    for name in ("step 4", "spike"):
        assert put[name]["verdict"] == NOT_MEASURED and put[name]["requests"] is None


def test_server_columns_per_level(run_prefix: str):
    baseline = rows_by(levels_of(run_prefix))["baseline"]
    assert baseline["fsync_p99_ms"] == 6.0  # polls at +3 .. +6 end inside (+2.4, +6.2]
    assert baseline["rss_mb_per_min"] == pytest.approx(60.0)  # 1 MB a second


# --- verdicts, capacity and the first breach ----------------------------------------------------------------------


def test_verdicts_capacity_and_first_breach_with_a_failing_level_in_the_middle(run_prefix: str):
    result = levels_of(run_prefix)
    verdicts = {level.window.name: level.verdict for level in result.levels}
    assert verdicts == {
        "baseline": PASS,
        "step 1": FAIL,
        "step 2": PASS,  # passes, but above a failing level: not capacity
        "step 3": FAIL,
        "step 4": NOT_MEASURED,
        "spike": NOT_MEASURED,
    }
    assert result.gates_from == "the run's --etcd-sla"
    assert result.capacity.window.name == "baseline"
    assert result.first_breach.gate == "put:p99<20ms"
    summary = result.summary()
    assert (summary["capacity_qps"], summary["capacity_level"], summary["capacity_users"]) == (100.0, "baseline", 10)
    assert summary["first_breach"]["level"] == "step 1"
    assert summary["first_breach"]["measured"] == pytest.approx(25.0, rel=1e-3)
    assert result.sentence() == (
        "capacity: 100 QPS (baseline) under put:p99<20ms and achieved QPS >= 95 % of planned; "
        "first breach at step 1: put p99 25 ms"
    )


def test_given_gates_replace_the_runs_own(run_prefix: str):
    result = levels_of(run_prefix, sla="put:p99<30ms")
    assert result.gates_from == "--sla"
    assert result.capacity.window.name == "step 2"
    assert result.breach.window.name == "step 3" and result.first_breach.gate == "keep-up"
    assert result.sentence().endswith("first breach at step 3: achieved 0.0 QPS, 0.0 % of planned 400")
    no_gates = levels_of(run_prefix, sla="")
    assert no_gates.gates == () and no_gates.capacity.window.name == "step 2"  # the keep-up rule alone


def test_the_keep_up_rule_at_95_percent():
    window = LevelWindow(1, "step", 10, 100.0, False, T0, T0, T0 + 10)
    data = Measurements({}, {"put": 949}, {"put": 0}, 10.0)
    [below] = judge(window, (), data, 94.9, exact=True)
    [at] = judge(window, (), data, 95.0, exact=True)
    assert (below.passed, at.passed) == (False, True)
    closed_loop = LevelWindow(1, "rung", 10, None, False, T0, T0, T0 + 10)
    assert judge(closed_loop, (), data, 94.9, exact=True) == []


def test_latency_gates_judge_the_window_histogram_and_are_not_judged_without_one():
    window = LevelWindow(1, "rung", 8, None, False, T0, T0, T0 + 2)
    histogram = hdr.histogram_of([1.0] * 98 + [30.0] * 2)
    data = Measurements({"put": histogram}, {"put": 100}, {"put": 3}, 2.0)
    gates = parse_gates("put:p99<20ms,errors<5%,qps>40")
    assert [check.passed for check in judge(window, gates, data, 50.0, exact=True)] == [False, True, True]
    unjudged = judge(window, gates, data, 50.0, exact=False)
    assert [check.passed for check in unjudged] == [None, True, True]


def test_capacity_is_ordered_by_load_and_skips_levels_not_judged():
    def result(number: int, qps: float | None, users: int, verdict: str) -> LevelResult:
        window = LevelWindow(number, f"l{number}", users, qps, False, T0, T0, T0 + 1)
        check = [Check("g", "put p99", 1.0, "1 ms", verdict == PASS)] if verdict in (PASS, FAIL) else []
        return LevelResult(window, 1.0, [], check, verdict, 1.0)

    # a sine-like order: the load goes up and down; a level of higher load that passes does not raise capacity
    levels = [result(1, 50, 5, PASS), result(2, 80, 8, PASS), result(3, 60, 6, FAIL), result(4, 70, 7, NOT_JUDGED)]
    capacity, breach = capacity_and_breach(levels)
    assert (capacity.window.name, breach.window.name) == ("l1", "l3")
    rungs = [result(1, None, 1, PASS), result(2, None, 200, PASS), result(3, None, 2000, PASS)]
    assert capacity_and_breach(rungs)[0].window.users == 2000 and capacity_and_breach(rungs)[1] is None


# --- command line -------------------------------------------------------------------------------------------------


def test_cli_prints_the_level_table_last_line_and_writes_the_files(run_prefix: str, tmp_path: Path):
    out = tmp_path / "report"
    result = cli(run_prefix, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| run | name | requests | QPS |")  # the comparison table, as before
    header = next(line for line in lines if line.startswith("| run | level | name |"))
    assert "| planned_users | planned_qps | window_s | achieved_qps | requests | failures | error_pct |" in header
    assert "| fsync_p99_ms | rss_mb_per_min | verdict | breaches | source |" in header
    assert any(line.startswith("| steps | step 1 | put | 20 | 200.0 | 3.0 | 200.0 | 600 | 0 |") for line in lines)
    assert lines[-1] == (
        "capacity: 100 QPS (baseline) under put:p99<20ms and achieved QPS >= 95 % of planned; "
        "first breach at step 1: put p99 25 ms"
    )
    for name in ("levels.md", "levels.csv", "levels.json", "levels.png", "levels.svg"):
        assert (out / name).stat().st_size > 0, name
    table = pd.read_csv(out / "levels.csv")
    assert list(table["level"].drop_duplicates()) == ["baseline", "step 1", "step 2", "step 3", "step 4", "spike"]
    document = json.loads((out / "levels.json").read_text())
    assert (document["capacity_qps"], document["capacity_level"]) == (100.0, "baseline")
    assert document["first_breach"]["level"] == "step 1" and document["first_breach"]["gate"] == "put:p99<20ms"
    [run] = document["runs"]
    assert len(run["levels"]) == 6 * 3  # put, range/serializable and all requests per level
    assert ElementTree.parse(out / "levels.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert (out / "levels.md").read_text().splitlines()[-1] == lines[-1]


def test_cli_sla_overrides_and_bad_gates_are_one_line(run_prefix: str):
    result = cli(run_prefix, "--sla", "put:p99<30ms", "--names", "put")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("capacity: 300 QPS (step 2) under put:p99<30ms")
    bad = cli(run_prefix, "--sla", "put:p99<<3")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("python -m analysis: error: --sla: 'put:p99<<3' is not a gate")


def test_a_run_without_a_shape_record_gets_no_level_table(tmp_path: Path):
    prefix = write_run(tmp_path / "plain", None)
    out = tmp_path / "report"
    result = cli(prefix, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "| level |" not in result.stdout and "capacity:" not in result.stdout
    assert not (out / "levels.csv").exists()
    assert levels_of(prefix) is None


def test_locust_history_alone_gives_counts_and_no_latency_verdict(tmp_path: Path):
    """Locust's CSVs with --csv-full-history (tests/fixtures/analysis/locust_full): rows end at +201 ... +204."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
    for suffix in ("_stats.csv", "_stats_history.csv", "_failures.csv"):
        (tmp_path / f"full{suffix}").write_bytes((fixtures / f"locust_full{suffix}").read_bytes())
    base = 1_700_000_200
    record = {"started_at": base, "ended_at": base + 4.0, "sla": "put:p99<20ms", "levels": [
        {"name": "steady", "users": 100, "qps": 1000.0, "spawn_rate": 100.0, "warmup": False,
         "started_at": base + 0.0, "running_at": base + 1.0, "errors": None},
    ]}  # fmt: skip
    (tmp_path / "full_shape.json").write_text(json.dumps(record))
    result = levels_of(str(tmp_path / "full"))
    [steady] = result.levels
    row = steady.rows[0]
    assert (row["source"], row["window_s"], row["requests"], row["achieved_qps"]) == ("locust", 3.0, 3000, 1000.0)
    assert row["p99_ms"] == 6.0  # Locust's last 10 s at +204, whole ms
    assert steady.verdict == NOT_JUDGED and row["breaches"].startswith("not judged: put p99")
    assert any("source locust" in note for note in result.notes)
