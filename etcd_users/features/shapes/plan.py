"""Load plans: the list of levels each profile runs, computed from ``ShapeSettings`` alone.

A plan is a contiguous list of ``Level``s starting at 0 s; the run stops at the end of the last one.

Conventions shared by the profiles:

- QPS levels become users through the per-user rate of the etcd users' rate-driven mode
  (``--etcd-user-rate``): ``users = ceil(qps / rate)``, so the offered load is never below the target.
- Each level's users are reached early: within ``max(10 % of the level, 1 s)``, and a spike within its
  first second. The spawn rate is ``max(ceil(|change in users| / that window), 1)`` users/s.
- ``--shape-time-scale`` multiplies every duration; a scaled level lasts at least 1 s because Locust's
  shape worker ticks about once a second and would skip a shorter level.
- ``--shape-warmup`` prepends a level named ``warmup`` with the first level's load, marked ``warmup=True``.
"""

import bisect
import dataclasses
import math
import random
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.features.shapes.options import MAX_LEVELS, MAX_SECONDS, MAX_USERS, SettingsError, ShapeSettings
from etcd_users.judging.levels import Level

RAMP_FRACTION = 0.1
"""Share of a level within which its user count is reached."""
MIN_RAMP_S = 1.0
"""Shortest ramp window: Locust spawns in whole-second batches."""
SPIKE_RAMP_S = 1.0
"""A spike reaches its users within its first second."""
MIN_LEVEL_S = 1.0
"""Shortest scaled level: Locust's shape worker ticks about once a second."""


@dataclass(frozen=True)
class _Stage:
    """A level before it is placed on the timeline; ``duration_s`` is already scaled."""

    name: str
    duration_s: float
    users: int
    qps: float | None = None
    ramp_s: float | None = None
    """Window to reach ``users`` in; None: the default share of the level."""
    warmup: bool = False


def qps_rate_message(shape_name: str, example_rate: float = 10) -> str:
    return (
        f"{shape_name} targets QPS: set --etcd-user-rate (requests/s per user), "
        f"for example --etcd-user-rate {example_rate:g}"
    )


def require_user_rate(settings: ShapeSettings, shape_name: str, example_rate: float = 10) -> float:
    """The per-user rate a QPS profile divides by; refuses closed-loop users in one line."""
    if settings.user_rate <= 0:
        raise SettingsError(qps_rate_message(shape_name, example_rate))
    return settings.user_rate


def users_for_qps(qps: float, user_rate: float) -> int:
    """Users that offer at least ``qps`` when each sends ``user_rate`` requests/s."""
    return max(1, math.ceil(qps / user_rate - 1e-9))


def scaled(seconds: float, time_scale: float) -> float:
    """A duration under ``--shape-time-scale``; 0 stays 0 (the level is left out)."""
    return 0.0 if seconds <= 0 else max(seconds * time_scale, MIN_LEVEL_S)


def spawn_rate(previous_users: int, users: int, window_s: float) -> float:
    """Users/s that move from ``previous_users`` to ``users`` within ``window_s`` (at least 1)."""
    return float(max(math.ceil(abs(users - previous_users) / window_s - 1e-9), 1))


def step_spike_plan(settings: ShapeSettings, shape_name: str = "StepSpikeShape") -> list[Level]:
    """A published etcd load model: baseline, +step QPS every step time up to max (the last step capped at max),
    spike, stop.

    With the defaults: 100 QPS for 300 s, then 300, 500, ..., 1900 and 2000 QPS for 120 s each,
    then 3000 QPS for 5 s (1505 s in all).
    """
    rate = require_user_rate(settings, shape_name)
    scale = settings.time_scale

    def qps_stage(name: str, seconds: float, qps: float, ramp_s: float | None = None) -> _Stage:
        return _Stage(name, scaled(seconds, scale), users_for_qps(qps, rate), float(qps), ramp_s)

    steps = math.ceil(max(settings.max_qps - settings.baseline_qps, 0) / settings.step_qps)
    if steps > MAX_LEVELS:
        raise SettingsError(
            f"--shape-step-qps: steps of {settings.step_qps} QPS from {settings.baseline_qps} to {settings.max_qps} "
            f"make {steps} levels, more than {MAX_LEVELS}; take larger steps or a lower --shape-max-qps"
        )
    stages = [qps_stage("baseline", settings.baseline_time, settings.baseline_qps)]
    qps = settings.baseline_qps
    while qps < settings.max_qps:
        qps = min(qps + settings.step_qps, settings.max_qps)
        stages.append(qps_stage(f"step {len(stages)}", settings.step_time, qps))
    stages.append(qps_stage("spike", settings.spike_time, settings.spike_qps, ramp_s=SPIKE_RAMP_S))
    plan = _lay_out(stages, settings)
    if not plan:
        raise SettingsError(
            "--shape-baseline-time, --shape-spike-time: both are 0 and --shape-max-qps equals the baseline, "
            "so the plan is empty; set a duration above 0"
        )
    return plan


def search_plan(settings: ShapeSettings, shape_name: str = "CapacitySearchShape") -> list[Level]:
    """A capacity search's first probe (after the warm-up, if any), held ``--shape-step-time``; the later probes
    are appended during the run (``probe_level``)."""
    rate = require_user_rate(settings, shape_name)
    highest = users_for_qps(settings.search_max, rate)
    if highest > MAX_USERS:
        raise SettingsError(
            f"--shape-search-max: {settings.search_max} QPS at {rate:g} requests/s per user takes {shown(highest)} "
            f"users, more than {MAX_USERS}; raise --etcd-user-rate or lower --shape-search-max"
        )
    hold = scaled(settings.step_time, settings.time_scale)
    qps = float(settings.search_start)
    return _lay_out([_Stage("probe 1", hold, users_for_qps(qps, rate), qps)], settings)


def probe_level(name: str, start_s: float, settings: ShapeSettings, qps: float, previous_users: int) -> Level:
    """A level appended to a running plan at ``start_s``, held ``--shape-step-time`` (scaled)."""
    hold = scaled(settings.step_time, settings.time_scale)
    users = users_for_qps(qps, settings.user_rate)
    window = max(RAMP_FRACTION * hold, MIN_RAMP_S)
    start = math.floor(start_s * 1e6) / 1e6  # never after ``start_s``: the level runs at the tick that adds it
    return Level(name, start, round(start + hold, 6), users, float(qps), spawn_rate(previous_users, users, window))


def ladder_plan(settings: ShapeSettings) -> list[Level]:
    """A published 3-node TLS etcd benchmark: closed-loop users 1, 200, 2000, ... each held ``--shape-step-time``."""
    hold = scaled(settings.step_time, settings.time_scale)
    stages = [_Stage(f"ladder {i}", hold, users) for i, users in enumerate(settings.ladder, start=1)]
    return _lay_out(stages, settings)


def sine_qps(settings: ShapeSettings, t: float, jitter: float) -> float:
    """``base + amplitude * sin(2 pi t / period) + jitter`` at unscaled time ``t``, never below 1 QPS."""
    wave = settings.sine_base + settings.sine_amplitude * math.sin(2 * math.pi * t / settings.sine_period)
    return max(1.0, round(wave + jitter, 2))


def sine_plan(settings: ShapeSettings, shape_name: str = "SineWaveShape") -> list[Level]:
    """A published etcd load model: the sine-wave rate with uniform jitter from ``random.Random(seed)``.

    The target is re-evaluated every ``--shape-sine-step`` seconds for ``period x cycles`` seconds. Under a
    time scale the wave is sampled at the unscaled time of each level's start, so a scaled run shows the
    same curve, more coarsely if the scaled step had to be raised to 1 s.
    """
    rate = require_user_rate(settings, shape_name, example_rate=1)
    scale = settings.time_scale
    total = scaled(settings.sine_period * settings.sine_cycles, scale)
    step = min(scaled(settings.sine_step, scale), total)
    rng = random.Random(settings.seed)
    low, high = settings.sine_jitter
    levels = math.ceil(total / step - 1e-9)
    if levels > MAX_LEVELS:
        raise SettingsError(
            f"--shape-sine-step: {settings.sine_step} s steps over {settings.sine_cycles} cycles of "
            f"{settings.sine_period} s make {levels} levels, more than {MAX_LEVELS}; take longer steps or fewer cycles"
        )
    stages = []
    for i in range(levels):
        start = i * step
        qps = sine_qps(settings, start / scale, rng.uniform(low, high))
        stages.append(_Stage(f"sine {i + 1}", min(step, total - start), users_for_qps(qps, rate), qps))
    return _lay_out(stages, settings)


def _lay_out(stages: list[_Stage], settings: ShapeSettings) -> list[Level]:
    """Place stages end to end (after the warm-up, if any) and give each its spawn rate."""
    stages = [stage for stage in stages if stage.duration_s > 0]
    if stages and settings.warmup > 0:
        first = stages[0]
        warmup_s = scaled(settings.warmup, settings.time_scale)
        stages.insert(0, dataclasses.replace(first, name="warmup", duration_s=warmup_s, ramp_s=None, warmup=True))
    _check_size(stages, settings)
    plan: list[Level] = []
    start = 0.0
    previous_users = 0
    for stage in stages:
        window = stage.ramp_s if stage.ramp_s is not None else max(RAMP_FRACTION * stage.duration_s, MIN_RAMP_S)
        end = round(start + stage.duration_s, 6)
        plan.append(
            Level(
                name=stage.name,
                start_s=start,
                end_s=end,
                users=stage.users,
                qps=stage.qps,
                spawn_rate=spawn_rate(previous_users, stage.users, window),
                warmup=stage.warmup,
            )
        )
        start = end
        previous_users = stage.users
    return plan


def _check_size(stages: list[_Stage], settings: ShapeSettings) -> None:
    """A plan Locust can run: no level beyond MAX_USERS users, and an end within a year."""
    crowded = max(stages, key=lambda stage: stage.users, default=None)
    if crowded is not None and crowded.users > MAX_USERS:
        target = f"targets {crowded.qps:g} QPS, which at {settings.user_rate:g} requests/s per user takes"
        raise SettingsError(
            f"--etcd-user-rate: level '{crowded.name}' {target if crowded.qps else 'needs'} {shown(crowded.users)} "
            f"users, more than {MAX_USERS}; raise --etcd-user-rate or lower the shape's QPS"
        )
    total = sum(stage.duration_s for stage in stages)
    if not total <= MAX_SECONDS:
        if settings.time_scale > 1:
            raise SettingsError(
                f"--shape-time-scale: {settings.time_scale:g} makes a plan of {total:g} s, more than a year "
                f"({MAX_SECONDS} s); use a smaller scale"
            )
        raise SettingsError(
            f"--shape-sine-cycles, --shape-*-time: the plan would last {total:g} s, more than a year "
            f"({MAX_SECONDS} s); give fewer cycles or shorter durations"
        )


def level_index_at(plan: list[Level], t: float) -> int | None:
    """Index of the level running at ``t`` seconds, or None before the start and after the end."""
    index = bisect.bisect_right(plan, t, key=lambda level: level.start_s) - 1
    if index < 0 or t >= plan[index].end_s:
        return None
    return index


def level_at(plan: list[Level], t: float) -> Level | None:
    """The level running at ``t`` seconds, or None once the plan is over."""
    index = level_index_at(plan, t)
    return None if index is None else plan[index]


def plan_duration(plan: list[Level]) -> float:
    return plan[-1].end_s if plan else 0.0


def format_plan(plan: list[Level], user_rate: float = 0.0) -> str:
    """The plan as a text table (one row per level)."""
    rows = [("#", "level", "start s", "end s", "QPS", "users", "spawn/s", "")]
    for number, level in enumerate(plan, start=1):
        rows.append(
            (
                str(number),
                level.name,
                f"{level.start_s:g}",
                f"{level.end_s:g}",
                "-" if level.qps is None else f"{level.qps:g}",
                str(level.users),
                f"{level.spawn_rate:g}",
                "warm-up, not measured" if level.warmup else "",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    rate = f"{user_rate:g} requests/s per user" if user_rate > 0 else "closed-loop users"
    lines.append(f"{len(plan)} levels, {plan_duration(plan):g} s, {rate}")
    return "\n".join(lines)
