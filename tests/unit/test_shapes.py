"""The load shapes over simulated time: plans, tick() sequences, settings errors and option registration."""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust import LoadTestShape
from locust.event import Events
from locust.runners import WorkerRunner
from locust.stats import RequestStats, StatsError

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import REPO

from etcd_users.features.shapes.base import PlannedShape
from etcd_users.features.shapes.ladder import ConcurrencyLadderShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import MIN_LEVEL_S, Level, level_at, level_index_at, sine_qps
from etcd_users.features.shapes.sine import SineWaveShape
from etcd_users.features.shapes.step_spike import StepSpikeShape
from etcd_users.judging.judged import JudgedShape, check_on_init, judged_shape
from etcd_users.settings import SettingsError

DEFAULT_STEPS = [300, 500, 700, 900, 1100, 1300, 1500, 1700, 1900, 2000]


def options(**overrides) -> argparse.Namespace:
    """Parsed options as Locust would hand them over: every --shape-* default, no rate, no CSV."""
    values = {
        **{option.dest: option.default for option in ShapeSettings.options()},
        "etcd_user_rate": 0.0,
        "csv_prefix": None,
        "class_picker": False,
    }
    unknown = set(overrides) - set(values)
    assert not unknown, f"not an option: {unknown}"
    values.update(overrides)
    return argparse.Namespace(**values)


def fake_runner(parsed_options: argparse.Namespace) -> SimpleNamespace:
    """What a shape uses of Locust's runner: its environment (options, events), stats, user count, shape greenlet."""
    runner = SimpleNamespace(shape_greenlet=None, user_count=0, stats=RequestStats())
    runner.environment = SimpleNamespace(parsed_options=parsed_options, events=Events(), runner=runner)
    return runner


def make_shape(shape_class: type[PlannedShape], **overrides) -> tuple[PlannedShape, list[float]]:
    """A shape on a fake runner whose run time is ``clock[0]``."""
    shape = shape_class()
    shape.runner = fake_runner(options(**overrides))
    clock = [0.0]
    shape.get_run_time = lambda: clock[0]
    return shape, clock


def tick_at(shape: PlannedShape, clock: list[float], t: float):
    clock[0] = t
    return shape.tick()


def spawned(shape: PlannedShape, users: int) -> None:
    """The local runner has ``users`` users, and says so."""
    shape.runner.user_count = users
    shape.runner.environment.events.spawning_complete.fire(user_count=users)


def settings(**overrides) -> ShapeSettings:
    return ShapeSettings.from_options(options(**overrides))


def ramp_window(level: Level) -> float:
    return 1.0 if level.name == "spike" else max(0.1 * level.duration_s, 1.0)


# --- step plus spike (the load-model report) ---


def test_step_spike_default_plan():
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    assert tick_at(shape, clock, 0) == (10, 1.0)
    plan = shape.plan
    assert [level.name for level in plan] == ["baseline"] + [f"step {i}" for i in range(1, 11)] + ["spike"]
    assert [level.qps for level in plan] == [100] + DEFAULT_STEPS + [3000]
    assert [level.users for level in plan] == [10] + [qps // 10 for qps in DEFAULT_STEPS] + [300]
    assert (plan[0].start_s, plan[0].end_s) == (0, 300)
    for number, level in enumerate(plan[1:11]):
        assert (level.start_s, level.end_s) == (300 + 120 * number, 420 + 120 * number)
    assert (plan[-1].start_s, plan[-1].end_s) == (1500, 1505)
    assert not any(level.warmup for level in plan)


def test_step_spike_tick_sequence_and_boundaries():
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    expected = {
        0: 10,
        299.9: 10,
        300: 30,
        419.9: 30,
        420: 50,
        1379.9: 190,
        1380: 200,
        1499.9: 200,
        1500: 300,
        1504.9: 300,
    }
    for t, users in expected.items():
        assert tick_at(shape, clock, t)[0] == users, t
    assert tick_at(shape, clock, 1505) is None
    assert tick_at(shape, clock, 2000) is None


def test_step_spike_every_second():
    """Ticking once a second, as Locust does, visits every level in order and then stops."""
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    seen = []
    t = 0
    while (tick := tick_at(shape, clock, t)) is not None:
        if not seen or seen[-1] != tick[0]:
            seen.append(tick[0])
        t += 1
    assert t == 1505
    assert seen == [level.users for level in shape.plan]


def test_spawn_rates_reach_each_level_early():
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    shape.tick()
    previous = 0
    for level in shape.plan:
        seconds_to_reach = abs(level.users - previous) / level.spawn_rate
        assert seconds_to_reach <= ramp_window(level), level
        assert level.spawn_rate >= 1
        previous = level.users
    spike = shape.plan[-1]
    assert (spike.users - shape.plan[-2].users) / spike.spawn_rate <= 1.0


def test_last_step_capped_at_max():
    plan = StepSpikeShape().build_plan(settings(etcd_user_rate=1.0, shape_step_qps=300, shape_max_qps=1000))
    assert [level.qps for level in plan] == [100, 400, 700, 1000, 3000]
    plan = StepSpikeShape().build_plan(settings(etcd_user_rate=1.0, shape_max_qps=100))
    assert [level.name for level in plan] == ["baseline", "spike"]


def test_zero_durations_leave_levels_out():
    plan = StepSpikeShape().build_plan(settings(etcd_user_rate=10.0, shape_baseline_time=0, shape_spike_time=0))
    assert [level.name for level in plan] == [f"step {i}" for i in range(1, 11)]
    assert plan[0].start_s == 0


def test_qps_rounds_up_to_whole_users():
    plan = StepSpikeShape().build_plan(settings(etcd_user_rate=3.0))
    assert plan[0].users == 34  # 100 QPS / 3 per user: 33 users would offer only 99


# --- concurrency ladder (the 3-node TLS field report) ---


def test_ladder_default_plan_and_ticks():
    shape, clock = make_shape(ConcurrencyLadderShape)  # closed loop: no rate needed
    assert tick_at(shape, clock, 0) == (1, 1.0)
    assert [level.users for level in shape.plan] == [1, 200, 2000, 5000, 10000, 20000]
    assert all(level.qps is None for level in shape.plan)
    assert [level.start_s for level in shape.plan] == [0, 120, 240, 360, 480, 600]
    assert tick_at(shape, clock, 119.9)[0] == 1
    assert tick_at(shape, clock, 120)[0] == 200
    assert tick_at(shape, clock, 719.9)[0] == 20000
    assert tick_at(shape, clock, 720) is None
    previous = 0
    for level in shape.plan:
        assert abs(level.users - previous) / level.spawn_rate <= 12.0  # 10 % of the 120 s rung
        previous = level.users


def test_ladder_from_option_and_rate_warning(caplog):
    shape, clock = make_shape(ConcurrencyLadderShape, shape_ladder="1,5", shape_step_time=10, etcd_user_rate=2.0)
    with caplog.at_level(logging.WARNING, logger="etcd_users.shapes.base"):
        assert tick_at(shape, clock, 0) == (1, 1.0)
    assert [level.users for level in shape.plan] == [1, 5]
    assert "leave --etcd-user-rate at 0" in caplog.text
    assert tick_at(shape, clock, 20) is None


# --- sine wave (the load-model report) ---


def test_sine_values_within_wave_plus_jitter():
    shape, clock = make_shape(SineWaveShape, etcd_user_rate=1.0)
    tick_at(shape, clock, 0)
    plan = shape.plan
    assert len(plan) == 300 // 5
    assert all(level.duration_s == 5 for level in plan)
    assert plan[-1].end_s == 300
    for level in plan:
        wave = 50 + 30 * math.sin(2 * math.pi * level.start_s / 300)
        assert wave - 8 - 0.01 <= level.qps <= wave + 12 + 0.01
        assert 50 - 30 - 8 <= level.qps <= 50 + 30 + 12
        assert level.users == math.ceil(level.qps - 1e-9)
    assert len({level.qps for level in plan}) > 30  # the jitter really varies
    assert tick_at(shape, clock, 300) is None


def test_sine_repeatable_with_same_seed():
    first = SineWaveShape().build_plan(settings(etcd_user_rate=1.0, shape_seed=7))
    again = SineWaveShape().build_plan(settings(etcd_user_rate=1.0, shape_seed=7))
    other = SineWaveShape().build_plan(settings(etcd_user_rate=1.0, shape_seed=8))
    assert first == again
    assert [level.qps for level in first] != [level.qps for level in other]


def test_sine_without_jitter_follows_the_formula_and_cycles():
    plan = SineWaveShape().build_plan(
        settings(etcd_user_rate=1.0, shape_sine_jitter="0,0", shape_sine_cycles=2, shape_sine_step=10)
    )
    assert plan[-1].end_s == 600 and len(plan) == 60
    for level in plan:
        assert level.qps == pytest.approx(50 + 30 * math.sin(2 * math.pi * level.start_s / 300), abs=0.01)


def test_sine_never_below_one_qps():
    plan = SineWaveShape().build_plan(settings(etcd_user_rate=1.0, shape_sine_base=0.0, shape_sine_amplitude=30.0))
    assert min(level.qps for level in plan) == 1.0
    assert min(level.users for level in plan) == 1
    assert sine_qps(settings(shape_sine_base=0.0), t=225, jitter=-8) == 1.0


def test_sine_coarse_rate_warns(caplog):
    shape, clock = make_shape(SineWaveShape, etcd_user_rate=10.0)
    with caplog.at_level(logging.WARNING, logger="etcd_users.shapes.base"):
        tick_at(shape, clock, 0)
    assert "a smaller rate gives finer levels" in caplog.text


# --- time scale and warm-up ---


def test_time_scale_multiplies_durations_with_a_one_second_floor():
    plan = StepSpikeShape().build_plan(settings(etcd_user_rate=10.0, shape_time_scale=0.05))
    assert (plan[0].start_s, plan[0].end_s) == (0, 15)
    assert all(level.duration_s == pytest.approx(6) for level in plan[1:11])
    assert plan[-1].duration_s == MIN_LEVEL_S  # 5 s x 0.05 = 0.25 s, raised so a 1 Hz tick cannot miss it
    assert plan[-1].end_s == pytest.approx(76)
    assert [level.qps for level in plan] == [100] + DEFAULT_STEPS + [3000]
    previous = 0
    for level in plan:
        assert abs(level.users - previous) / level.spawn_rate <= ramp_window(level) + 1e-9
        previous = level.users


def test_time_scale_on_sine_keeps_the_curve():
    plan = SineWaveShape().build_plan(settings(etcd_user_rate=1.0, shape_time_scale=0.1, shape_sine_jitter="0,0"))
    assert plan[-1].end_s == pytest.approx(30)
    assert all(level.duration_s == pytest.approx(1) for level in plan)  # 5 s x 0.1 raised to 1 s
    quarter = level_at(plan, 7.5)  # a quarter period of the scaled 30 s wave: near the crest
    assert quarter.qps == pytest.approx(50 + 30 * math.sin(2 * math.pi * 70 / 300), abs=0.01)


def test_warmup_prepends_the_first_level():
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0, shape_warmup=60)
    assert tick_at(shape, clock, 0)[0] == 10
    warmup, baseline = shape.plan[0], shape.plan[1]
    assert (warmup.name, warmup.start_s, warmup.end_s, warmup.warmup) == ("warmup", 0, 60, True)
    assert (warmup.users, warmup.qps) == (baseline.users, baseline.qps)
    assert warmup.users / warmup.spawn_rate <= 6  # ramped within the warm-up, not into the measured window
    assert (baseline.start_s, baseline.end_s, baseline.warmup) == (60, 360, False)
    assert shape.plan[-1].end_s == 1565
    assert sum(level.warmup for level in shape.plan) == 1


def test_warmup_is_scaled():
    plan = ConcurrencyLadderShape().build_plan(settings(shape_warmup=100, shape_time_scale=0.1))
    assert (plan[0].name, plan[0].end_s, plan[0].users) == ("warmup", 10, 1)
    assert plan[1].start_s == 10


def test_level_lookup_edges():
    plan = ConcurrencyLadderShape().build_plan(settings(shape_ladder="1,2", shape_step_time=10))
    assert level_index_at(plan, -0.1) is None
    assert level_index_at(plan, 0) == 0
    assert level_index_at(plan, 10) == 1
    assert level_index_at(plan, 20) is None
    assert level_at([], 0) is None


# --- errors ---

QPS_RATE_MESSAGE = (
    "StepSpikeShape targets QPS: set --etcd-user-rate (requests/s per user), for example --etcd-user-rate 10"
)


def test_qps_shape_without_rate_stops_with_one_line(caplog):
    shape, clock = make_shape(StepSpikeShape)
    with caplog.at_level(logging.ERROR, logger="etcd_users.shapes.base"):
        assert tick_at(shape, clock, 0) is None
    assert [record.getMessage() for record in caplog.records] == [QPS_RATE_MESSAGE]


def test_sine_without_rate_suggests_a_fine_rate():
    with pytest.raises(SettingsError, match=r"^SineWaveShape targets QPS: .* --etcd-user-rate 1$"):
        SineWaveShape().build_plan(settings())


@pytest.mark.parametrize(
    ("overrides", "flag"),
    [
        ({"shape_baseline_time": -1}, "--shape-baseline-time"),
        ({"shape_spike_time": -5}, "--shape-spike-time"),
        ({"shape_warmup": -10}, "--shape-warmup"),
        ({"shape_step_time": 0}, "--shape-step-time"),
        ({"shape_max_qps": 50}, "--shape-max-qps"),
        ({"shape_step_qps": 0}, "--shape-step-qps"),
        ({"shape_ladder": "1,,x"}, "--shape-ladder"),
        ({"shape_ladder": "0,10"}, "--shape-ladder"),
        ({"shape_ladder": ""}, "--shape-ladder"),
        ({"shape_time_scale": 0.0}, "--shape-time-scale"),
        ({"shape_time_scale": -1.0}, "--shape-time-scale"),
        ({"shape_sine_jitter": "12,-8"}, "--shape-sine-jitter"),
        ({"shape_sine_jitter": "5"}, "--shape-sine-jitter"),
        ({"shape_sine_period": 0}, "--shape-sine-period"),
        ({"shape_sine_step": 0}, "--shape-sine-step"),
        ({"shape_sine_base": float("nan")}, "--shape-sine-base"),
        ({"shape_sine_amplitude": -1.0}, "--shape-sine-amplitude"),
        ({"shape_baseline_time": "abc"}, "--shape-baseline-time"),
        ({"etcd_user_rate": -1.0}, "--etcd-user-rate"),
        # what a value means, not only its type: finite, bounded, and quoted shortened
        *[({"shape_" + name: value}, "--shape-" + name.replace("_", "-"))
          for name in ("sine_base", "sine_amplitude", "time_scale")
          for value in (math.nan, math.inf, -math.inf)],
        ({"etcd_user_rate": math.nan}, "--etcd-user-rate"),
        ({"etcd_user_rate": math.inf}, "--etcd-user-rate"),
        ({"shape_baseline_qps": math.inf}, "--shape-baseline-qps"),  # int(inf) overflows
        ({"shape_baseline_qps": math.nan}, "--shape-baseline-qps"),
        ({"shape_step_time": 10**12}, "--shape-step-time"),
        ({"shape_baseline_time": 366 * 86400 + 1}, "--shape-baseline-time"),
        ({"shape_sine_period": 10**30}, "--shape-sine-period"),
        ({"shape_warmup": 10**9}, "--shape-warmup"),
        ({"shape_ladder": "1,2000000"}, "--shape-ladder"),
        ({"shape_ladder": ",".join(["1"] * 10001)}, "--shape-ladder"),
        ({"shape_ladder": "1," + "9" * 20000}, "--shape-ladder"),  # beyond int()'s digit limit
        ({"shape_ladder": "x" * 20000}, "--shape-ladder"),
        ({"shape_ladder": "1,\udcff"}, "--shape-ladder"),  # bytes that are not UTF-8
        ({"shape_sine_jitter": "nan,1"}, "--shape-sine-jitter"),
        ({"shape_sine_jitter": "-inf,inf"}, "--shape-sine-jitter"),
        ({"shape_sine_jitter": "1,\udcff"}, "--shape-sine-jitter"),
        ({"shape_sine_jitter": "1," + "2" * 20000}, "--shape-sine-jitter"),
        ({"shape_seed": "x" * 20000}, "--shape-seed"),
        ({"shape_search_rounds": 31}, "--shape-search-rounds"),
        ({"shape_search_start": 0}, "--shape-search-start"),
        ({"shape_search_start": 500, "shape_search_max": 100}, "--shape-search-max"),
        ({"shape_stop_on_breach": "maybe"}, "--shape-stop-on-breach"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_naming_the_option(overrides, flag):
    with pytest.raises(SettingsError) as caught:
        settings(**overrides)
    message = str(caught.value)
    assert message.startswith(flag + ":"), message
    assert "\n" not in message
    assert len(message) < 300, message  # a 20 kB value is quoted by its start and its length


@pytest.mark.parametrize(
    ("shape_class", "overrides", "start"),
    [
        # a million steps of 1 QPS: the plan alone would take the master's memory
        (StepSpikeShape, {"shape_step_qps": 1, "shape_max_qps": 10**9}, "--shape-step-qps: steps of 1 QPS from 100"),
        (SineWaveShape, {"shape_sine_cycles": 10**6, "shape_sine_step": 1}, "--shape-sine-step: 1 s steps over"),
        # a level of a billion users: Locust would try to spawn them
        (StepSpikeShape, {"shape_spike_qps": 10**9}, "--etcd-user-rate: level 'spike' targets 1e+09 QPS"),
        (SineWaveShape, {"shape_sine_base": 1e300}, "--etcd-user-rate: level 'sine 1' targets 1e+300 QPS"),
        (ConcurrencyLadderShape, {"shape_time_scale": 1e300}, "--shape-time-scale: 1e+300 makes a plan of"),
        (SineWaveShape, {"shape_sine_period": 366 * 86400, "shape_sine_cycles": 2, "shape_sine_step": 86400},
         "--shape-sine-cycles, --shape-*-time: the plan would last"),
    ],
)  # fmt: skip
def test_a_plan_beyond_what_locust_can_run_is_one_line(shape_class, overrides, start):
    shape = shape_class()
    with pytest.raises(SettingsError) as caught:
        shape.build_plan(settings(etcd_user_rate=10.0, **overrides))
    message = str(caught.value)
    assert message.startswith(start), message
    assert "\n" not in message and len(message) < 300, message


def test_settings_error_at_tick_then_recovery(caplog):
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0, shape_time_scale=0.0)
    with caplog.at_level(logging.ERROR, logger="etcd_users.shapes.base"):
        assert tick_at(shape, clock, 0) is None
    assert caplog.records[-1].getMessage().startswith("--shape-time-scale:")
    shape.runner.environment.parsed_options.shape_time_scale = 1.0
    assert tick_at(shape, clock, 0) == (10, 1.0)


def init_environment(shape, **overrides):
    return SimpleNamespace(shape_class=shape, runner=None, parsed_options=options(**overrides))


def test_init_refuses_bad_settings_before_the_run(capsys):
    with pytest.raises(SystemExit) as caught:
        check_on_init(init_environment(StepSpikeShape()))
    assert caught.value.code == 2
    assert capsys.readouterr().err == "locust-etcd: error: " + QPS_RATE_MESSAGE + "\n"


def test_init_accepts_good_settings_and_ignores_others(capsys):
    worker = init_environment(StepSpikeShape())  # no --etcd-user-rate: refused on its own (the test above)
    # workers get the master's options with each spawn message, so they are not judged by their own
    worker.runner = type("IdleWorker", (WorkerRunner,), {"__init__": lambda self: None, "__del__": lambda self: None})()
    environments = {
        "good settings": init_environment(StepSpikeShape(), etcd_user_rate=10.0),
        "no shape": init_environment(None),
        "the shape picked in the web UI": init_environment(StepSpikeShape(), class_picker=True),
        "a worker": worker,
    }
    for why, environment in environments.items():
        try:
            check_on_init(environment)
        except SystemExit as stopped:
            pytest.fail(f"{why}: the start was refused (exit {stopped.code}): {capsys.readouterr().err}")
        assert capsys.readouterr() == ("", ""), why  # the run starts, with nothing said


def test_the_tool_finds_its_shapes_and_no_other():
    class OtherShape(LoadTestShape):
        def tick(self):
            return None

    for shape in (StepSpikeShape(), ConcurrencyLadderShape(), SineWaveShape()):
        assert isinstance(shape, JudgedShape) and judged_shape(init_environment(shape)) is shape
    assert judged_shape(init_environment(OtherShape())) is None
    assert judged_shape(init_environment(None)) is None


# --- run behaviour: logs, CSV record, new runs ---


def test_level_change_logged_once(caplog):
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    with caplog.at_level(logging.INFO, logger="etcd_users.shapes.base"):
        for t in (0, 1, 2, 300, 301):
            tick_at(shape, clock, t)
    level_lines = [record.getMessage() for record in caplog.records if "shape: level" in record.getMessage()]
    assert level_lines == [
        "shape: level 1/12 'baseline' at 0.0s: 100 QPS = 10 users @ 10/s/user, spawn rate 1/s",
        "shape: level 2/12 'step 1' at 300.0s: 300 QPS = 30 users @ 10/s/user, spawn rate 2/s",
    ]


def test_shape_json_record(tmp_path):
    prefix = tmp_path / "results" / "run"
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0, shape_warmup=30, csv_prefix=str(prefix))
    path = Path(f"{prefix}_shape.json")
    tick_at(shape, clock, 0)
    record = json.loads(path.read_text())
    assert record["shape"] == "StepSpikeShape"
    assert record["started_at"] > 0 and record["ended_at"] is None
    assert record["levels"][0] == {
        "name": "warmup",
        "start_s": 0.0,
        "end_s": 30.0,
        "users": 10,
        "qps": 100.0,
        "spawn_rate": 4.0,
        "warmup": True,
        "started_at": record["levels"][0]["started_at"],
        "running_at": None,  # no runner here to spawn the users
        "ended_at": None,
        "errors": None,
        "verdict": None,  # warm-ups are never judged, and this run has no gates
        "checks": [],
    }
    assert record["sla"] is None
    assert record["levels"][0]["started_at"] is not None
    assert record["levels"][1]["started_at"] is None
    planned_warmup_end = record["warmup_end"]
    assert planned_warmup_end == pytest.approx(record["started_at"] + 30, abs=1)

    tick_at(shape, clock, 30)
    tick_at(shape, clock, 500)  # skips 'step 1' (as when Locust is busy spawning) into 'step 2'
    tick_at(shape, clock, 2000)
    record = json.loads(path.read_text())
    entered = {level["name"]: level["started_at"] for level in record["levels"]}
    assert entered["baseline"] is not None and entered["step 2"] is not None
    assert entered["step 1"] is None and entered["spike"] is None
    assert record["warmup_end"] == entered["baseline"]
    assert record["ended_at"] is not None
    assert [level["qps"] for level in record["levels"][1:]] == [100] + DEFAULT_STEPS + [3000]


def test_shape_records_when_each_level_is_running_and_its_failures(tmp_path):
    """running_at comes from Locust's spawning_complete with the level's user count; a level with the same users
    as the running one before it is running from its entry; errors are Locust's failures from running_at to the
    level's end; sla is the run's --etcd-sla text."""
    prefix = tmp_path / "run"
    shape, clock = make_shape(ConcurrencyLadderShape, shape_ladder="4,4,8", shape_step_time=10, csv_prefix=str(prefix))
    shape.runner.environment.parsed_options.etcd_sla = "put:p99<15ms"
    errors = shape.runner.stats.errors

    def fail(name: str, error: str, times: int) -> None:
        entry = errors.setdefault((name, error), StatsError("etcd", name, error))
        entry.occurrences += times

    def record() -> dict:
        return json.loads(Path(f"{prefix}_shape.json").read_text())

    fail("put", "etcdserver: leader changed", 5)  # before the first level is running: not counted
    tick_at(shape, clock, 0)
    spawned(shape, 2)  # part-way: not the level's count
    assert record()["levels"][0]["running_at"] is None
    spawned(shape, 4)
    first = record()["levels"][0]
    assert first["started_at"] <= first["running_at"] <= time.time()
    fail("put", "etcdserver: too many requests", 3)
    fail("range/serializable", "etcdserver: too many requests", 1)
    fail("put", "etcdserver: request timed out", 4)

    tick_at(shape, clock, 10)  # ladder 2: 4 users again, already running
    levels = record()["levels"]
    assert levels[1]["running_at"] == levels[1]["started_at"]
    assert levels[0]["errors"] == [
        {"name": "put", "error": "etcdserver: request timed out", "occurrences": 4},
        {"name": "put", "error": "etcdserver: too many requests", "occurrences": 3},
        {"name": "range/serializable", "error": "etcdserver: too many requests", "occurrences": 1},
    ]
    assert levels[1]["errors"] is None  # not ended yet

    tick_at(shape, clock, 20)  # ladder 3: 8 users to spawn
    assert record()["levels"][2]["running_at"] is None
    assert record()["levels"][1]["errors"] == []
    spawned(shape, 8)
    fail("put", "etcdserver: too many requests", 2)
    tick_at(shape, clock, 30)  # plan complete
    final = record()
    assert final["sla"] == "put:p99<15ms"
    assert final["levels"][2]["running_at"] <= final["ended_at"]
    assert final["levels"][2]["errors"] == [{"name": "put", "error": "etcdserver: too many requests", "occurrences": 2}]
    spawned(shape, 8)  # after the end: ignored
    assert record() == final


def test_a_master_whose_workers_have_not_reported_marks_the_level_at_the_tick_that_sees_them(tmp_path):
    """The master fires spawning_complete when its wait for the workers' reports expires, too: the runner's user
    count, as the workers reported it, must agree; else the next tick that sees the count marks the level."""
    prefix = tmp_path / "run"
    shape, clock = make_shape(ConcurrencyLadderShape, shape_ladder="4,8", shape_step_time=10, csv_prefix=str(prefix))
    tick_at(shape, clock, 0)
    shape.runner.environment.events.spawning_complete.fire(user_count=4)  # reports not in: 0 users known
    assert json.loads(Path(f"{prefix}_shape.json").read_text())["levels"][0]["running_at"] is None
    shape.runner.user_count = 4
    before = time.time()
    tick_at(shape, clock, 1)
    running_at = json.loads(Path(f"{prefix}_shape.json").read_text())["levels"][0]["running_at"]
    assert before <= running_at <= time.time()


def test_new_run_rebuilds_plan_from_current_options():
    """The web UI edits parsed_options between runs; start_shape() makes a new shape greenlet per run."""
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    shape.runner.shape_greenlet = object()
    assert tick_at(shape, clock, 0) == (10, 1.0)
    shape.runner.environment.parsed_options.shape_baseline_qps = 200
    assert tick_at(shape, clock, 1) == (10, 1.0)  # same run: same plan
    shape.runner.shape_greenlet = object()
    assert tick_at(shape, clock, 0) == (20, 1.0)


def test_describe_plan_before_and_during_a_run():
    shape, clock = make_shape(StepSpikeShape, etcd_user_rate=10.0)
    text = shape.describe_plan()
    assert "spike" in text and "1505 s" in text
    assert shape.plan == []  # describing does not start a run
    tick_at(shape, clock, 0)
    assert shape.describe_plan() == text
    assert shape.current_level.name == "baseline"


# --- modules and options as Locust loads them ---


def run_python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_modules_import_and_register_options_once():
    code = """
import etcd_users.users  # as a locustfile loads the tool: its options
import etcd_users.features.shapes.step_spike, shapes.ladder, shapes.sine
import etcd_users.features.shapes.options
from locust.argument_parser import get_parser
parser = get_parser()
parsed = parser.parse_args(["--shape-ladder", "1,5", "--shape-sine-jitter=-2,3", "--shape-time-scale", "0.5"])
from etcd_users.features.shapes.options import ShapeSettings
s = ShapeSettings.from_options(parsed)
group = [g for g in parser._action_groups if g.title == "etcd load shapes"]
print(s.ladder, s.sine_jitter, s.time_scale, len(group), len(group[0]._group_actions))
in_ui = [dest for dest in parser.args_included_in_web_ui if dest.startswith("shape_")]
print(len(in_ui), sorted(type(parser.get_default(dest)).__name__ for dest in in_ui))
print(s.seed, s.warmup)
"""
    result = run_python(code, cwd=REPO, LOCUST_SHAPE_SEED="9", LOCUST_SHAPE_WARMUP="30")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(1, 5) (-2.0, 3.0) 0.5 1 21"
    assert lines[1] == "21 " + str(sorted(["bool"] + ["float"] * 3 + ["int"] * 15 + ["str"] * 2))
    assert lines[2] == "9 30"  # environment variables
    assert result.stderr == ""


def test_each_module_loads_by_path_from_elsewhere_with_one_shape(tmp_path):
    """As `locust -f locustfile.py,shapes/step_spike.py` loads it, even from another directory."""
    code = f"""
from locust.util.load_locustfile import load_locustfile
from locust.argument_parser import get_parser
load_locustfile({str(REPO / "locustfile.py")!r})  # the tool's options come with its users
for name in ("step_spike", "ladder", "sine", "capacity"):
    users, shapes = load_locustfile({str(REPO / "shapes")!r} + "/" + name + ".py")
    print(name, [type(shape).__name__ for shape in shapes])
get_parser().parse_args(["--shape-seed", "3"])
"""
    result = run_python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "step_spike ['StepSpikeShape']",
        "ladder ['ConcurrencyLadderShape']",
        "sine ['SineWaveShape']",
        "capacity ['CapacitySearchShape']",
    ]
