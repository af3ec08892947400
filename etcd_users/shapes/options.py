"""The ``--shape-*`` command-line options and their validation into one frozen ``ShapeSettings``.

Every option has an environment variable (``SHAPE_...``) and a typed default: Locust's web UI casts the
form's strings to the default's type, so lists travel as comma-separated strings.
"""

from locust import events

import argparse
import math
import sys
from dataclasses import dataclass

from etcd_users.arguments import Option, add_option_group, reference_table, shown

GROUP_TITLE = "etcd load shapes"
# Bounds of what a plan can mean: Locust spawns every user of a level (a greenlet each) and the shape ticks once a
# second, so beyond these a plan hangs the master or never ends rather than runs.
MAX_USERS = 1_000_000
MAX_LEVELS = 10_000
MAX_SECONDS = 366 * 24 * 3600  # a year
MAX_ROUNDS = 30  # bisection rounds: 2^30 narrows any QPS bracket below one request a second


OPTIONS = (
    Option("--shape-baseline-qps", 100, "StepSpikeShape: QPS of the baseline level."),
    Option("--shape-baseline-time", 300, "StepSpikeShape: seconds the baseline is held (0: no baseline)."),
    Option("--shape-step-qps", 200, "StepSpikeShape: QPS added by each step after the baseline."),
    Option(
        "--shape-step-time",
        120,
        "Seconds each step is held: the QPS steps of StepSpikeShape and the rungs of ConcurrencyLadderShape.",
    ),
    Option("--shape-max-qps", 2000, "StepSpikeShape: QPS of the last step; the final step is capped to reach it."),
    Option("--shape-spike-qps", 3000, "StepSpikeShape: QPS of the spike after the last step."),
    Option("--shape-spike-time", 5, "StepSpikeShape: seconds the spike lasts (0: no spike)."),
    Option(
        "--shape-ladder",
        "1,200,2000,5000,10000,20000",
        "ConcurrencyLadderShape: comma-separated closed-loop user counts, one rung each.",
    ),
    Option("--shape-sine-base", 50.0, "SineWaveShape: mean QPS of the wave."),
    Option("--shape-sine-amplitude", 30.0, "SineWaveShape: QPS amplitude of the wave."),
    Option("--shape-sine-period", 300, "SineWaveShape: seconds per cycle of the wave."),
    Option("--shape-sine-cycles", 1, "SineWaveShape: cycles to run; the run lasts period x cycles."),
    Option(
        "--shape-sine-jitter",
        "-8,12",
        "SineWaveShape: LOW,HIGH range of the uniform random QPS added at each re-evaluation. "
        "Write --shape-sine-jitter=-8,12 (with '=') when LOW is negative.",
    ),
    Option("--shape-sine-step", 5, "SineWaveShape: seconds between re-evaluations of the wave."),
    Option("--shape-seed", 1, "Seed of the random jitter: the same seed gives the same run."),
    Option(
        "--shape-time-scale",
        1.0,
        "Multiplies every duration, e.g. 0.05 to smoke-test a 25-minute profile in about 80 s "
        "(scaled levels last at least 1 s).",
    ),
    Option(
        "--shape-warmup",
        0,
        "Seconds to run the first level before the measured window; the analysis drops this window.",
    ),
    Option(
        "--shape-stop-on-breach",
        False,
        "End the run after the first level that fails its --etcd-sla gates or falls below 95% of its planned QPS "
        "(judged live on the master, once the workers' reports cover the level).",
    ),
    Option("--shape-search-start", 100, "CapacitySearchShape: QPS of the first probe."),
    Option(
        "--shape-search-max",
        10000,
        "CapacitySearchShape: highest QPS probed; the probes double from --shape-search-start up to it.",
    ),
    Option(
        "--shape-search-rounds",
        3,
        "CapacitySearchShape: probes that halve the bracket between the last passing and the first failing QPS.",
    ),
)

DEFAULTS = {option.dest: option.default for option in OPTIONS}


@events.init_command_line_parser.add_listener
def _register(parser, **_kwargs) -> None:
    add_option_group(parser, GROUP_TITLE, "Load profiles of the shapes/ classes (each option has an env var)", OPTIONS)


class ShapeSettingsError(ValueError):
    """Bad shape input, told in one line that names the option and the fix."""


@dataclass(frozen=True)
class ShapeSettings:
    """The validated ``--shape-*`` options plus the per-user rate of the etcd users."""

    baseline_qps: int
    baseline_time: int
    step_qps: int
    step_time: int
    max_qps: int
    spike_qps: int
    spike_time: int
    ladder: tuple[int, ...]
    sine_base: float
    sine_amplitude: float
    sine_period: int
    sine_cycles: int
    sine_jitter: tuple[float, float]
    sine_step: int
    seed: int
    time_scale: float
    warmup: int
    stop_on_breach: bool
    search_start: int
    search_max: int
    search_rounds: int
    user_rate: float
    """Requests/s of each user (``--etcd-user-rate``); 0 means closed loop."""

    @classmethod
    def from_options(cls, parsed_options: argparse.Namespace | None) -> "ShapeSettings":
        """Validate parsed options (from the command line, env vars or the web UI form); missing ones take defaults."""

        def get(dest: str):
            return getattr(parsed_options, dest, DEFAULTS[dest]) if parsed_options is not None else DEFAULTS[dest]

        settings = cls(
            baseline_qps=_int("--shape-baseline-qps", get("shape_baseline_qps"), minimum=1),
            baseline_time=_seconds("--shape-baseline-time", get("shape_baseline_time"), minimum=0),
            step_qps=_int("--shape-step-qps", get("shape_step_qps"), minimum=1),
            step_time=_seconds("--shape-step-time", get("shape_step_time"), minimum=1),
            max_qps=_int("--shape-max-qps", get("shape_max_qps"), minimum=1),
            spike_qps=_int("--shape-spike-qps", get("shape_spike_qps"), minimum=1),
            spike_time=_seconds("--shape-spike-time", get("shape_spike_time"), minimum=0),
            ladder=_ladder(get("shape_ladder")),
            sine_base=_float("--shape-sine-base", get("shape_sine_base"), minimum=0.0),
            sine_amplitude=_float("--shape-sine-amplitude", get("shape_sine_amplitude"), minimum=0.0),
            sine_period=_seconds("--shape-sine-period", get("shape_sine_period"), minimum=1),
            sine_cycles=_int("--shape-sine-cycles", get("shape_sine_cycles"), minimum=1),
            sine_jitter=_jitter(get("shape_sine_jitter")),
            sine_step=_seconds("--shape-sine-step", get("shape_sine_step"), minimum=1),
            seed=_int("--shape-seed", get("shape_seed")),
            time_scale=_float("--shape-time-scale", get("shape_time_scale"), minimum=0.0, exclusive=True),
            warmup=_seconds("--shape-warmup", get("shape_warmup"), minimum=0),
            stop_on_breach=_bool("--shape-stop-on-breach", get("shape_stop_on_breach")),
            search_start=_int("--shape-search-start", get("shape_search_start"), minimum=1),
            search_max=_int("--shape-search-max", get("shape_search_max"), minimum=1),
            search_rounds=_int("--shape-search-rounds", get("shape_search_rounds"), minimum=0, maximum=MAX_ROUNDS),
            user_rate=_float(
                "--etcd-user-rate",
                getattr(parsed_options, "etcd_user_rate", 0.0) if parsed_options is not None else 0.0,
                minimum=0.0,
            ),
        )
        if settings.max_qps < settings.baseline_qps:
            raise ShapeSettingsError(
                f"--shape-max-qps: {settings.max_qps} is below --shape-baseline-qps {settings.baseline_qps}; "
                "raise --shape-max-qps or lower the baseline"
            )
        if settings.search_max < settings.search_start:
            raise ShapeSettingsError(
                f"--shape-search-max: {settings.search_max} is below --shape-search-start {settings.search_start}; "
                "raise --shape-search-max or lower the start"
            )
        return settings


def _bool(flag: str, value) -> bool:
    """A switch; the web UI's form sends it as a bool, an env var as text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ShapeSettingsError(f"{flag}: {shown(value)} is not true or false")


def _int(flag: str, value, minimum: int | None = None, maximum: int | None = None, unit: str = "") -> int:
    try:
        number = int(value)
        if number != value and not isinstance(value, str):
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # int(inf) overflows, int(nan) is a ValueError
        raise ShapeSettingsError(
            f"{flag}: {shown(value)} is not a whole number; give e.g. {_default_of(flag)!r}"
        ) from None
    if minimum is not None and number < minimum:
        raise ShapeSettingsError(f"{flag}: {shown(number)} must be {minimum} or more")
    if maximum is not None and number > maximum:
        raise ShapeSettingsError(f"{flag}: {shown(number)} must be {maximum}{unit} or less")
    return number


def _seconds(flag: str, value, minimum: int) -> int:
    """A duration: whole seconds, at most a year (a longer plan is a typo, and never ends)."""
    return _int(flag, value, minimum=minimum, maximum=MAX_SECONDS, unit=" s (a year)")


def _float(flag: str, value, minimum: float | None = None, exclusive: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ShapeSettingsError(f"{flag}: {shown(value)} is not a finite number; give e.g. {_default_of(flag)!r}")
    if minimum is not None and (number < minimum or (exclusive and number == minimum)):
        bound = f"greater than {minimum:g}" if exclusive else f"{minimum:g} or more"
        raise ShapeSettingsError(f"{flag}: {number:g} must be {bound}")
    return number


def _ladder(value) -> tuple[int, ...]:
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise ShapeSettingsError(
            f"--shape-ladder: {shown(text)} is not a comma-separated list of user counts of 1 or more; "
            "give e.g. 1,200,2000,5000"
        )
    if len(counts) > MAX_LEVELS:
        raise ShapeSettingsError(f"--shape-ladder: {len(counts)} rungs are more than {MAX_LEVELS} levels")
    if max(counts) > MAX_USERS:
        raise ShapeSettingsError(
            f"--shape-ladder: a rung of {shown(max(counts))} users is more than {MAX_USERS} Locust users; "
            "give e.g. 1,200,2000,5000"
        )
    return counts


def _jitter(value) -> tuple[float, float]:
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    parts = text.split(",")
    try:
        low, high = (float(part) for part in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        low = high = math.nan
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ShapeSettingsError(
            f"--shape-sine-jitter: {shown(text)} is not LOW,HIGH with LOW <= HIGH; "
            "give e.g. --shape-sine-jitter=-8,12 (or 0,0 for no jitter)"
        )
    return low, high


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def _default_of(flag: str):
    return DEFAULTS.get(_dest(flag), 10.0)


if __name__ == "__main__":
    sys.stdout.write(reference_table(OPTIONS) + "\n")
