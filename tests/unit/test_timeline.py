"""A run's timeline of levels and the ``PREFIX_shape.json`` written from it: what the analysis and the web UI read."""

import json

from etcd_users.analysis.levels import level_windows
from etcd_users.features.shapes.plan import Level
from etcd_users.features.shapes.record import record_path, shape_record, write_json
from etcd_users.features.shapes.timeline import RECORDED_ERRORS, Timeline
from etcd_users.features.webui.tabs import level_rows
from etcd_users.files import SHAPE_REQUIRED_KEYS
from etcd_users.judging.level_verdicts import FAIL, KEEP_UP_GATE, PASS, LevelCheck, LevelVerdict

T0 = 1_700_000_000.0
PLAN = [
    Level("warmup", 0.0, 5.0, 10, 100.0, 10.0, warmup=True),
    Level("baseline", 5.0, 15.0, 10, 100.0, 1.0),
    Level("step 1", 15.0, 25.0, 20, 200.0, 10.0),
]
PUT_TIMEOUT = ("put", "etcdserver: request timed out")


def failing(name: str) -> LevelVerdict:
    checks = [
        LevelCheck("put:p99<15ms", False, 20.5, "put p99 20.5ms > 15ms"),
        LevelCheck(KEEP_UP_GATE, True, 199.0, "achieved 199.0 QPS >= 95% of planned 200"),
    ]
    return LevelVerdict(name, FAIL, checks, 9, 199.0)


def test_each_level_records_its_plan_then_what_happened_in_the_files_keys():
    timeline = Timeline(PLAN, started_at=T0)
    timeline.enter(0, T0)
    timeline.mark_running(0, T0 + 1, {})
    assert timeline.end(0, T0 + 5, {PUT_TIMEOUT: 2})
    timeline.enter(1, T0 + 5)  # entered, never all running, not ended
    level = timeline[0].to_dict()
    assert list(level) == [
        *("name", "start_s", "end_s", "users", "qps", "spawn_rate", "warmup"),
        *("started_at", "running_at", "ended_at", "errors", "verdict", "checks"),
    ]
    assert level["started_at"] == T0 and level["running_at"] == T0 + 1 and level["ended_at"] == T0 + 5
    assert level["errors"] == [{"name": "put", "error": "etcdserver: request timed out", "occurrences": 2}]
    assert (level["verdict"], level["checks"]) == (None, [])  # a warm-up: never judged
    waiting = timeline[1].to_dict()
    assert (waiting["running_at"], waiting["ended_at"], waiting["errors"]) == (None, None, None)


def test_a_levels_errors_count_from_its_users_all_running_to_its_end_once():
    timeline = Timeline(PLAN, started_at=T0)
    before = {PUT_TIMEOUT: 5, ("range", "etcdserver: too many requests"): 1}
    timeline.mark_running(1, T0 + 6, before)
    now = {**before, PUT_TIMEOUT: 8, ("range", "etcdserver: too many requests"): 1, ("put", "EOF"): 3}
    now.update({(f"key {n}", "etcdserver: too many requests"): 1 for n in range(RECORDED_ERRORS)})
    assert timeline.end(1, T0 + 15, now)
    errors = timeline[1].errors
    assert errors[:2] == [
        {"name": "put", "error": "EOF", "occurrences": 3},  # most frequent first, ties by name and error
        {"name": "put", "error": "etcdserver: request timed out", "occurrences": 3},
    ]
    assert len(errors) == RECORDED_ERRORS and "range" not in {error["name"] for error in errors}  # did not grow
    assert not timeline.end(1, T0 + 20, {PUT_TIMEOUT: 100})  # ends once: the first end stands
    assert timeline[1].ended_at == T0 + 15 and timeline[1].errors == errors
    timeline.end(2, T0 + 25, now)
    assert timeline[2].errors is None  # never all running: no window to count failures over


def test_the_measured_window_starts_at_the_first_measured_levels_entry_else_its_planned_start():
    timeline = Timeline(PLAN, started_at=T0)
    assert timeline.warmup_end() == T0 + 5
    timeline.enter(1, T0 + 5.7)  # the tick came late
    assert timeline.warmup_end() == T0 + 5.7
    assert Timeline(PLAN[1:], started_at=T0).warmup_end() is None  # no warm-up
    assert Timeline().warmup_end() is None


def test_the_written_record_holds_the_verdicts_the_analysis_and_the_web_ui_read(tmp_path):
    timeline = Timeline(PLAN, started_at=T0)
    for index, (entered, running, ended) in enumerate([(0, 1, 5), (5, 6, 15), (15, 16.5, 25)]):
        timeline.enter(index, T0 + entered)
        timeline.mark_running(index, T0 + running, {})
        timeline.end(index, T0 + ended, {})
    timeline[1].verdict = LevelVerdict(
        "baseline", PASS, [LevelCheck("put:p99<15ms", True, 2.0, "put p99 2ms < 15ms")], 9, 100.0
    )
    timeline[2].verdict = failing("step 1")
    timeline.ended_at = T0 + 25
    path = record_path(str(tmp_path / "out" / "run"))
    write_json(path, shape_record("StepSpikeShape", timeline, 10.0, "put:p99<15ms", None))
    assert path == tmp_path / "out" / "run_shape.json" and not list(path.parent.glob("*.tmp"))

    record = json.loads(path.read_text())
    assert list(record) == ["shape", "started_at", "warmup_end", "ended_at", "user_rate", "sla", "stopped", "levels"]
    assert all(key in record for key in SHAPE_REQUIRED_KEYS)
    assert (record["warmup_end"], record["ended_at"], record["user_rate"]) == (T0 + 5, T0 + 25, 10.0)
    assert [level["verdict"] for level in record["levels"]] == [None, "pass", "FAIL"]
    assert record["levels"][2]["checks"] == [
        {"gate": "put:p99<15ms", "passed": False, "measured": 20.5, "line": "put p99 20.5ms > 15ms"},
        {"gate": "keep-up", "passed": True, "measured": 199.0, "line": "achieved 199.0 QPS >= 95% of planned 200"},
    ]

    windows = {window.name: window for window in level_windows(record)}
    assert (windows["step 1"].start, windows["step 1"].end) == (T0 + 16.5, T0 + 25)  # from running to its end
    rows = level_rows(record)
    assert [(row["name"], row["verdict"]) for row in rows] == [
        ("level 'baseline' at 100 QPS", "pass"),
        ("level 'step 1' at 200 QPS", "FAIL"),
    ]


def test_a_level_appended_during_the_run_is_recorded_like_a_planned_one():
    timeline = Timeline(PLAN[1:2], started_at=T0)
    timeline.append(Level("probe 2", 10.0, 20.0, 20, 200.0, 10.0))
    assert [level.name for level in timeline.plan] == ["baseline", "probe 2"]
    assert timeline.index_at(12.0) == 1 and timeline.index_at(20.0) is None
    assert timeline[1].to_dict()["started_at"] is None
