"""Live verdicts per level: the windows of merged seconds, the verdict rules (the analysis' own), the shape's record,
the stop on breach, the master's wait for its workers' reports, and the capacity search's decisions."""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust.event import Events
from locust.runners import MasterRunner
from locust.stats import RequestStats

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from etcd_users import hdr
from etcd_users.analysis.levels import LevelWindow, level_windows
from etcd_users.analysis.levels import judge as analysis_judge
from etcd_users.analysis.levels import verdict as analysis_verdict
from etcd_users.core.plugin import install
from etcd_users.features.shapes import judging
from etcd_users.features.shapes.capacity import BISECT, GROW, CapacitySearch, CapacitySearchShape
from etcd_users.features.shapes.step_spike import StepSpikeShape
from etcd_users.judging.level_verdicts import FAIL, KEEP_UP_GATE, PASS, judge_level, window_measurements
from etcd_users.judging.sla import Measurements
from etcd_users.judging.sla_specs import parse_gates
from etcd_users.latency import store as latency_store
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.windows import Windows
from etcd_users.settings import SettingsError
from unit.test_shapes import options

PUT = ("etcd", "put", "service")
T0 = 1_700_000_000.0


def histogram_of(*latencies_ms: float):
    return hdr.histogram_of(list(latencies_ms))


# --- windows ---


def test_a_window_merges_only_its_whole_seconds_into_one_histogram_per_key():
    windows = Windows()
    windows.settle(T0 - 100)
    windows.open("level", T0 + 0.4)  # running at .4: the first whole second is T0+1
    for second in range(int(T0), int(T0) + 5):
        windows.add(second, PUT, histogram_of(1.0, 2.0))
        windows.add_failures(second, PUT, 1)
    windows.close("level", T0 + 4.9995)  # ends within the file's millisecond precision of T0+5
    windows.add(int(T0) + 2, PUT, histogram_of(3.0))  # a late report for a second inside: counted
    windows.add(int(T0) + 5, PUT, histogram_of(3.0))  # after the end: not
    window = windows.take("level")
    assert (window.first_second, window.end_second, window.seconds) == (int(T0) + 1, int(T0) + 5, 4)
    assert list(window.histograms) == [PUT]
    assert window.histograms[PUT].get_total_count() == 4 * 2 + 1
    assert window.failures == {PUT: 4}
    assert windows.take("level") is None and len(windows) == 0  # forgotten once taken


def test_a_window_opened_before_the_first_request_starts_at_its_second():
    """Users spawned are not sending yet (their on_start connects): the analysis measures from the run's first
    request's next whole second; the window keeps its seconds apart until that request is known for good."""
    windows = Windows()
    windows.open("level", T0)
    windows.add(int(T0) + 2, PUT, histogram_of(5.0))  # the partial second of the first request, at T0+2.3
    windows.add(int(T0) + 3, PUT, histogram_of(1.0))
    windows.settle(T0 + 2.3)
    windows.add(int(T0) + 4, PUT, histogram_of(1.0))
    windows.close("level", T0 + 5)
    window = windows.take("level")
    assert (window.first_second, window.seconds) == (int(T0) + 3, 2)
    assert window.histograms[PUT].get_total_count() == 2
    windows.open("later", T0 + 10)  # settled: no keeping apart
    assert windows.take("later").settled


def test_the_part_of_the_current_second_reported_before_the_end_is_left_out_with_the_rest():
    """A worker ships what it recorded so far: the first 0.2 s of the second in which the level then ends."""
    now = [T0 + 5.2]
    windows = Windows(lambda: now[0])
    windows.settle(T0 - 100)
    windows.open("level", T0 + 0.5)
    for second in range(int(T0) + 1, int(T0) + 5):
        windows.add(second, PUT, histogram_of(1.0))
    windows.add(int(T0) + 5, PUT, histogram_of(9.0))  # T0+5.0 to 5.2, reported at 5.2
    now[0] = T0 + 5.4
    windows.close("level", T0 + 5.4)  # the level ends inside T0+5: the window is T0+1 .. T0+4
    window = windows.take("level")
    assert window.seconds == 4 and window.histograms[PUT].get_total_count() == 4
    assert window.histograms[PUT].get_max_value() < 2000


# --- the verdict rules ---


def measurements(seconds: int, requests: int, failures: int = 0, latency_ms: float = 2.0) -> Measurements:
    windows = Windows()
    windows.settle(T0)
    windows.open(0, T0)
    per_second = requests // seconds
    for second in range(int(T0), int(T0) + seconds):
        windows.add(second, PUT, hdr.histogram_of([latency_ms] * (per_second - failures // seconds)))
        if failures:
            windows.add_failures(second, PUT, failures // seconds)
    windows.close(0, T0 + seconds)
    return window_measurements(windows.take(0))


def test_a_level_passes_with_its_measured_values_and_fails_naming_what_broke():
    gates = parse_gates("put:p99<15ms,errors<1%")
    good = judge_level("step 7", gates, measurements(5, 2000, latency_ms=9.1), planned_qps=400)
    assert good.verdict == PASS
    assert good.line().startswith("level 'step 7': pass (put p99 9.")
    assert good.line().endswith("; achieved 400.0 QPS >= 95% of planned 400)")
    assert [check.gate for check in good.checks] == ["put:p99<15ms", "errors<1%", KEEP_UP_GATE]

    bad = judge_level("step 8", gates, measurements(5, 2000, failures=50, latency_ms=18.2), planned_qps=450)
    assert bad.verdict == FAIL
    assert bad.line().startswith("level 'step 8': FAIL put p99 18.")
    assert "ms > 15ms; Aggregated errors 2.500% (50 of 2000) > 1%; achieved 400.0 QPS < 95% of planned 450" in (
        bad.line()
    )
    p99 = bad.checks[0]
    assert p99.to_dict()["gate"] == "put:p99<15ms" and p99.passed is False
    assert 18.2 <= p99.measured < 18.3  # ms
    assert bad.checks[2].measured == pytest.approx(400.0)


def test_latency_is_recorded_in_ms_whatever_the_gates_unit():
    check = judge_level("x", parse_gates("put:p99<900us"), measurements(2, 200, latency_ms=1.5), None).checks[0]
    assert check.passed is False and 1.5 <= check.measured < 1.51
    assert check.line.startswith("put p99 15") and check.line.endswith("us > 900us")


def test_a_level_without_a_whole_second_is_not_judged():
    data = Measurements({}, {}, {}, 0.0)
    result = judge_level("spike", parse_gates("put:p99<15ms"), data, 3000)
    assert result.verdict is None and result.checks == []
    assert result.line() == "level 'spike': not judged (no whole second with its users all running)"


@pytest.mark.parametrize(
    ("sla", "requests", "failures", "latency_ms", "planned"),
    [
        ("put:p99<15ms", 1000, 0, 2.0, 200),
        ("put:p99<15ms", 1000, 0, 20.0, 200),
        ("put:p99<15ms", 900, 0, 2.0, 200),  # 180 QPS: below 95 % of 200
        ("errors<0.1%,put:max<=3ms", 1000, 10, 2.0, None),
        ("range/serializable:p99<15ms", 1000, 0, 2.0, 200),  # a name that never ran fails
        ("qps>=199", 1000, 0, 2.0, None),
    ],
)
def test_live_verdicts_agree_with_the_analysis(sla, requests, failures, latency_ms, planned):
    gates = parse_gates(sla)
    data = measurements(5, requests, failures, latency_ms)
    live = judge_level("l", gates, data, planned)
    window = LevelWindow(1, "l", 20, planned, False, T0, T0, T0 + 5)
    checks = analysis_judge(window, gates, data, sum(data.requests.values()) / data.duration_s, exact=True)
    assert live.verdict == analysis_verdict(checks)
    assert [check.passed for check in live.checks] == [check.passed for check in checks]


# --- the shape on a simulated single process or master ---


class Run:
    """A shape on a fake runner whose wall clock (``time.time`` and the latency store's) is ``self.now``."""

    def __init__(self, monkeypatch, tmp_path: Path, shape_class=StepSpikeShape, runner=None, **overrides) -> None:
        self.now = T0
        monkeypatch.setattr(time, "time", lambda: self.now)
        monkeypatch.setattr(latency_store, "_now", lambda: self.now)
        self.prefix = tmp_path / "run"
        values = {
            "etcd_user_rate": 10.0,
            "csv_prefix": str(self.prefix),
            "shape_baseline_qps": 100,
            "shape_baseline_time": 10,
            "shape_step_qps": 100,
            "shape_max_qps": 300,
            "shape_step_time": 10,
            "shape_spike_time": 0,
            **overrides,
        }
        sla = values.pop("etcd_sla", "put:p99<15ms")
        parsed = options(**values)
        parsed.etcd_sla = sla
        self.events = Events()
        self.plugin = install(self.events, etcd=False)
        self.breaches: list[str] = []
        stats = RequestStats()
        self.runner = runner if runner is not None else SimpleNamespace(user_count=0, stats=stats)
        self.runner.shape_greenlet = None
        self.environment = SimpleNamespace(
            parsed_options=parsed, events=self.events, runner=self.runner, stats=stats, reset_stats=False
        )
        self.runner.environment = self.environment
        self.plugin.get(LatencyRecorder).environment = self.environment
        self.shape = shape_class()
        self.shape.runner = self.runner
        self.shape.get_run_time = lambda: self.now - T0
        # what the tool gives its shapes at init
        self.shape.recorder = self.plugin.get(LatencyRecorder)
        self.shape.on_breach = self.breaches.append

    def tick(self):
        return self.shape.tick()

    def running(self, users: int) -> None:
        """The runner has ``users`` users (a master: as its worker reported them), and says so."""
        if isinstance(self.runner, MasterRunner):
            self.runner.clients["w1"].user_count = users
        else:
            self.runner.user_count = users
        self.environment.events.spawning_complete.fire(user_count=users)

    def load(self, seconds: int, qps: int, latency_ms: float) -> None:
        """``qps`` requests a second for ``seconds`` seconds from now, then the clock at the next whole second."""
        start = int(self.now) + 1
        for second in range(start, start + seconds):
            for i in range(qps):
                self.now = second + i / qps
                self.plugin.get(LatencyRecorder).record("etcd", "put", latency_ms)
        self.now = start + seconds

    def record(self) -> dict:
        return json.loads(Path(f"{self.prefix}_shape.json").read_text())


def test_each_level_is_judged_when_it_ends_and_recorded(monkeypatch, tmp_path, caplog):
    run = Run(monkeypatch, tmp_path)
    with caplog.at_level(logging.INFO):
        assert run.tick()[0] == 10  # baseline, 100 QPS
        run.now += 0.2
        run.running(10)
        run.load(9, 100, 2.0)  # T0+1 .. T0+9, then the clock at T0+10: the level's end
        assert run.tick()[0] == 20  # step 1, 200 QPS; the baseline judged at once (single process)
        run.now += 0.3
        run.running(20)
        run.load(9, 150, 20.0)  # slow and short of 95 % of 200
        assert run.tick()[0] == 30
        run.now += 0.3
        run.running(30)
        run.load(9, 300, 1.0)
        assert run.tick() is None
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("level '")]
    assert len(lines) == 3
    assert lines[0].startswith("level 'baseline': pass (put p99 2.")
    assert lines[0].endswith("achieved 100.0 QPS >= 95% of planned 100)")
    assert lines[1].startswith("level 'step 1': FAIL put p99 20.")
    assert lines[1].endswith("ms > 15ms; achieved 150.0 QPS < 95% of planned 200")
    assert lines[2].startswith("level 'step 2': pass")
    assert run.breaches == [lines[1]]  # the run's first failing level, once

    levels = run.record()["levels"]
    assert [level["verdict"] for level in levels] == ["pass", "FAIL", "pass"]
    assert levels[1]["checks"][0]["gate"] == "put:p99<15ms" and levels[1]["checks"][0]["passed"] is False
    assert 20.0 <= levels[1]["checks"][0]["measured"] < 20.1
    assert levels[1]["checks"][1] == {
        "gate": "keep-up",
        "passed": False,
        "measured": 150.0,
        "line": "achieved 150.0 QPS < 95% of planned 200",
    }
    assert [level["ended_at"] for level in levels] == [T0 + 10, T0 + 20, T0 + 30]
    assert run.record()["stopped"] is None
    assert len(run.plugin.get(LatencyRecorder).store.windows) == 0  # nothing kept once judged


def test_stop_on_breach_ends_the_run_after_the_first_failing_level(monkeypatch, tmp_path, caplog):
    run = Run(monkeypatch, tmp_path, shape_stop_on_breach=True)
    run.tick()
    run.running(10)
    run.load(9, 100, 30.0)
    with caplog.at_level(logging.INFO):
        assert run.tick() is None  # the baseline failed: step 1 never starts
    record = run.record()
    assert record["stopped"] == "level 'baseline' failed (--shape-stop-on-breach)"
    assert record["ended_at"] == T0 + 10
    assert [level["verdict"] for level in record["levels"]] == ["FAIL", None, None]
    assert record["levels"][1]["started_at"] is None
    assert "shape: stopped at 10.0s: level 'baseline' failed (--shape-stop-on-breach)" in caplog.text


def test_a_failing_last_level_ends_the_plan_as_planned(monkeypatch, tmp_path, caplog):
    run = Run(monkeypatch, tmp_path, shape_stop_on_breach=True, shape_max_qps=100)  # the baseline alone
    run.tick()
    run.running(10)
    run.load(9, 100, 30.0)
    with caplog.at_level(logging.INFO):
        assert run.tick() is None
    assert run.record()["stopped"] is None and run.record()["levels"][0]["verdict"] == "FAIL"
    assert "shape: plan complete at 10.0s, stopping" in caplog.text


def test_warmup_levels_and_runs_without_gates_are_not_judged(monkeypatch, tmp_path):
    run = Run(monkeypatch, tmp_path, shape_warmup=10)
    run.tick()
    run.running(10)
    run.load(9, 100, 30.0)
    run.tick()
    assert run.record()["levels"][0]["verdict"] is None and run.breaches == []
    plain = Run(monkeypatch, tmp_path / "plain", etcd_sla="")
    plain.tick()
    plain.running(10)
    plain.load(9, 100, 30.0)
    plain.tick()
    assert plain.record()["levels"][0]["verdict"] is None and plain.shape._judge is None


def fake_master():
    master = type("FakeMaster", (MasterRunner,), {"__init__": lambda self: None, "__del__": lambda self: None})()
    master.clients = {"w1": SimpleNamespace(id="w1", state="running", user_count=0)}
    master.greenlet = [object()]  # its listener runs
    return master


def test_a_master_judges_a_level_once_every_worker_reported_past_its_end(monkeypatch, tmp_path):
    run = Run(monkeypatch, tmp_path, runner=fake_master())
    worker = latency_store.LatencyStore()

    def report() -> None:
        run.plugin.get(LatencyRecorder).on_worker_report({"etcd_latency": worker.export_report()}, client_id="w1")

    run.tick()
    run.now += 0.2
    run.running(10)
    for second in range(int(T0) + 1, int(T0) + 10):
        for i in range(100):
            run.now = second + i / 100
            worker.record("etcd", "put", 2.0)
    run.now = T0 + 9.5
    report()  # made before the level's end
    run.now = T0 + 10
    run.tick()  # step 1: the baseline waits for the worker
    assert run.record()["levels"][0]["verdict"] is None
    run.now = T0 + 10.05
    worker.record("etcd", "put", 2.0)  # after the end: in no level's window
    run.now = T0 + 11
    report()
    run.shape._judge.poll()
    level = run.record()["levels"][0]
    assert level["verdict"] == "pass"
    assert level["checks"][-1]["measured"] == pytest.approx(100.0)  # 900 requests over the 9 whole seconds


def test_a_master_merges_a_levels_seconds_as_they_come_not_at_its_end(monkeypatch, tmp_path):
    """Memory per level stays one histogram per key: the run's first request is settled within a report or two,
    then every complete second is merged into the window at once."""
    run = Run(monkeypatch, tmp_path, runner=fake_master())
    worker = latency_store.LatencyStore()
    run.tick()
    run.now += 0.2
    run.running(10)
    for second in range(int(T0) + 1, int(T0) + 4):
        for i in range(100):
            run.now = second + i / 100
            worker.record("etcd", "put", 2.0)
    run.now = T0 + 4.1
    run.plugin.get(LatencyRecorder).on_worker_report({"etcd_latency": worker.export_report()}, client_id="w1")
    run.tick()  # still the baseline
    windows = run.plugin.get(LatencyRecorder).store.windows
    assert windows.first_second == int(T0) + 1  # the first request, at T0+1.0 exactly, begins its second
    [window] = windows._windows.values()
    assert window.held == {} and window.histograms[PUT].get_total_count() == 300


def test_a_master_judges_without_a_silent_worker_after_the_bounded_wait(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(judging, "WAIT_S", 0.0)
    run = Run(monkeypatch, tmp_path, runner=fake_master())
    run.tick()
    run.running(10)
    run.now = T0 + 10
    with caplog.at_level(logging.WARNING):
        run.tick()
        run.shape._judge.poll()
    assert "judged without every worker's report past its end" in caplog.text
    assert run.record()["levels"][0]["verdict"] is None  # nothing arrived: no whole second with a request


# --- the capacity search ---


def decide(search: CapacitySearch, verdicts: list[str]) -> list[tuple[float, str]]:
    """Feed verdicts in order; the probes made (QPS, phase)."""
    search.first()
    for verdict in verdicts:
        if search.record(verdict) is None:
            break
    return [(probe.qps, probe.phase) for probe in search.probes]


def test_the_search_doubles_until_a_failure_then_bisects_the_bracket():
    search = CapacitySearch(start=100, maximum=10000, rounds=3, user_rate=10)
    probes = decide(search, [PASS, PASS, PASS, FAIL, PASS, FAIL, PASS])
    assert probes == [(100, GROW), (200, GROW), (400, GROW), (800, GROW), (600, BISECT), (700, BISECT), (650, BISECT)]
    assert (search.capacity, search.low, search.high) == (650, 650, 700)
    assert search.done == "3 bisection rounds done"
    assert search.sentence("put:p99<15ms") == "capacity: 650 QPS (bracket 650–700) under put:p99<15ms"


def test_the_search_caps_its_growth_at_the_maximum_and_reports_at_least_it():
    search = CapacitySearch(start=100, maximum=300, rounds=3, user_rate=10)
    assert decide(search, [PASS, PASS, PASS]) == [(100, GROW), (200, GROW), (300, GROW)]
    assert search.done == "--shape-search-max 300 QPS passed" and search.high is None
    assert search.sentence("g").startswith("capacity: at least 300 QPS")


def test_a_failing_first_probe_ends_the_search_with_no_capacity():
    search = CapacitySearch(start=100, maximum=1000, rounds=3, user_rate=10)
    assert decide(search, [FAIL]) == [(100, GROW)]
    assert search.capacity is None and search.done == "the first probe failed"
    assert search.sentence("g") == "capacity: below 100 QPS (the first probe failed) under g"


def test_the_bisection_stops_when_the_bracket_is_within_one_users_rate():
    search = CapacitySearch(start=400, maximum=1000, rounds=5, user_rate=100)
    # 500 QPS is 5 users, between 4 and 6: probed; 550 would be 6 users again, as 600
    assert decide(search, [PASS, FAIL, FAIL, PASS]) == [(400, GROW), (800, GROW), (600, BISECT), (500, BISECT)]
    assert (search.low, search.high) == (500, 600)
    assert search.done == "the bracket is within one user's rate (100 QPS)"


def test_a_probe_that_could_not_be_judged_ends_the_search():
    search = CapacitySearch(start=100, maximum=1000, rounds=3, user_rate=10)
    decide(search, [PASS, None])
    assert search.done.startswith("the probe at 200 QPS could not be judged")
    assert search.capacity == 100


def test_capacity_search_needs_gates_and_a_rate():
    shape = CapacitySearchShape()
    with pytest.raises(SettingsError, match=r"^--etcd-sla: CapacitySearchShape judges each probe by the gates"):
        shape.settings_and_plan(options(etcd_user_rate=10.0))
    no_rate = options()
    no_rate.etcd_sla = "put:p99<15ms"
    with pytest.raises(SettingsError, match=r"^CapacitySearchShape targets QPS: set --etcd-user-rate"):
        shape.settings_and_plan(no_rate)
    huge = options(etcd_user_rate=0.001, shape_search_max=10**6)
    huge.etcd_sla = "put:p99<15ms"
    with pytest.raises(SettingsError, match=r"^--shape-search-max: 1000000 QPS at 0.001 requests/s per user"):
        shape.settings_and_plan(huge)


def test_capacity_search_probes_level_by_level_and_writes_its_result(monkeypatch, tmp_path, caplog):
    """Latency grows past 15 ms above 500 QPS: 100, 200, 400 pass, 800 fails, then 600 fails, 500 passes."""
    run = Run(
        monkeypatch,
        tmp_path,
        CapacitySearchShape,
        shape_search_start=100,
        shape_search_max=2000,
        shape_search_rounds=2,
        shape_step_time=10,
    )
    with caplog.at_level(logging.INFO):
        tick = run.tick()
        while tick is not None:
            users = tick[0]
            run.now += 0.2
            run.running(users)
            qps = users * 10
            run.load(9, qps, 5.0 if qps <= 500 else 30.0)
            tick = run.tick()
    capacity = json.loads(Path(f"{run.prefix}_capacity.json").read_text())
    assert [(probe["qps"], probe["verdict"]) for probe in capacity["probes"]] == [
        (100, "pass"),
        (200, "pass"),
        (400, "pass"),
        (800, "FAIL"),
        (600, "FAIL"),
        (500, "pass"),
    ]
    assert capacity["capacity_qps"] == 500 and capacity["bracket"] == {"low": 500, "high": 600}
    assert capacity["complete"] is True and capacity["gates"] == ["put:p99<15ms"]
    summary = "capacity: 500 QPS (bracket 500–600) under put:p99<15ms and achieved QPS >= 95% of planned"
    assert capacity["summary"] == summary and summary in caplog.text
    levels = run.record()["levels"]
    assert [level["name"] for level in levels] == [f"probe {n}" for n in range(1, 7)]
    assert [level["verdict"] for level in levels] == [probe["verdict"] for probe in capacity["probes"]]
    assert "shape: level 4 'probe 4'" in caplog.text  # no total: the plan grows
    assert getattr(run.environment, "process_exit_code", None) is None and run.shape.exit_verdict() is None


def test_a_capacity_search_whose_first_probe_fails_gives_exit_code_3(monkeypatch, tmp_path):
    run = Run(monkeypatch, tmp_path, CapacitySearchShape, shape_search_start=100, shape_search_max=2000)
    tick = run.tick()
    while tick is not None:
        run.now += 0.2
        run.running(tick[0])
        run.load(9, tick[0] * 10, 30.0)  # every probe above the gate's 15 ms
        tick = run.tick()
    assert json.loads(Path(f"{run.prefix}_capacity.json").read_text())["capacity_qps"] is None
    under = "put:p99<15ms and achieved QPS >= 95% of planned"
    assert run.shape.exit_verdict() == (3, f"the capacity search found no QPS within {under}")


def test_the_web_uis_sla_tab_lists_the_levels_judged_so_far(monkeypatch, tmp_path):
    from etcd_users.features.webui.tabs import level_rows

    run = Run(monkeypatch, tmp_path)
    run.tick()
    run.running(10)
    run.load(9, 100, 30.0)
    run.tick()
    rows = level_rows(run.shape.shape_record())
    assert len(rows) == 1  # step 1 is running: no verdict yet
    assert rows[0]["name"] == "level 'baseline' at 100 QPS" and rows[0]["verdict"] == "FAIL"
    assert (
        rows[0]["measured"].startswith("put p99 30.")
        and "achieved 100.0 QPS >= 95% of planned 100" in rows[0]["measured"]
    )
    assert level_rows(None) == []


def test_the_analysis_ends_a_level_at_its_recorded_end_when_the_load_was_held_after_it():
    """A capacity search holds the load between a probe's end and the next probe: in no level's window."""
    shape = {
        "ended_at": T0 + 30,
        "levels": [
            {"name": "probe 1", "users": 10, "qps": 100, "started_at": T0, "running_at": T0 + 1, "ended_at": T0 + 10},
            {"name": "probe 2", "users": 20, "qps": 200, "started_at": T0 + 13, "running_at": T0 + 14},
        ],
    }
    first, second = level_windows(shape)
    assert (first.start, first.end, len(first.seconds)) == (T0 + 1, T0 + 10, 9)
    assert (second.start, second.end) == (T0 + 14, T0 + 30)  # no end of its own: the run's
