"""The ``--shape-*`` options, each declared once as a field of ``ShapeSettings``.

Every option has an environment variable (``LOCUST_SHAPE_...``) and a typed default: Locust's web UI casts the
form's strings to the default's type, so lists travel as comma-separated strings.
"""

import argparse
import math
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, option
from etcd_users.settings.workload import WorkloadSettings

# Bounds of what a plan can mean: Locust spawns every user of a level (a greenlet each) and the shape ticks once a
# second, so beyond these a plan hangs the master or never ends rather than runs.
MAX_USERS = 1_000_000
MAX_LEVELS = 10_000
MAX_SECONDS = 366 * 24 * 3600  # a year
MAX_ROUNDS = 30  # bisection rounds: 2^30 narrows any QPS bracket below one request a second


def _bool(flag: str, value) -> bool:
    """A switch; the web UI's form sends it as a bool, an env var as text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{flag}: {shown(value)} is not true or false")


def _int(flag: str, value, minimum: int | None = None, maximum: int | None = None, unit: str = "") -> int:
    try:
        number = int(value)
        if number != value and not isinstance(value, str):
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # int(inf) overflows, int(nan) is a ValueError
        raise SettingsError(f"{flag}: {shown(value)} is not a whole number; give e.g. {_default_of(flag)!r}") from None
    if minimum is not None and number < minimum:
        raise SettingsError(f"{flag}: {shown(number)} must be {minimum} or more")
    if maximum is not None and number > maximum:
        raise SettingsError(f"{flag}: {shown(number)} must be {maximum}{unit} or less")
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
        raise SettingsError(f"{flag}: {shown(value)} is not a finite number; give e.g. {_default_of(flag)!r}")
    if minimum is not None and (number < minimum or (exclusive and number == minimum)):
        bound = f"greater than {minimum:g}" if exclusive else f"{minimum:g} or more"
        raise SettingsError(f"{flag}: {number:g} must be {bound}")
    return number


def _ladder(value) -> tuple[int, ...]:
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise SettingsError(
            f"--shape-ladder: {shown(text)} is not a comma-separated list of user counts of 1 or more; "
            "give e.g. 1,200,2000,5000"
        )
    if len(counts) > MAX_LEVELS:
        raise SettingsError(f"--shape-ladder: {len(counts)} rungs are more than {MAX_LEVELS} levels")
    if max(counts) > MAX_USERS:
        raise SettingsError(
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
        raise SettingsError(
            f"--shape-sine-jitter: {shown(text)} is not LOW,HIGH with LOW <= HIGH; "
            "give e.g. --shape-sine-jitter=-8,12 (or 0,0 for no jitter)"
        )
    return low, high


def _default_of(flag: str):
    return next((declared.default for declared in ShapeSettings.options() if declared.flag == flag), 10.0)


def _whole(minimum: int | None = None, maximum: int | None = None):
    return lambda flag, value: _int(flag, value, minimum=minimum, maximum=maximum)


def _duration(minimum: int):
    return lambda flag, value: _seconds(flag, value, minimum=minimum)


def _number(minimum: float | None = None, exclusive: bool = False):
    return lambda flag, value: _float(flag, value, minimum=minimum, exclusive=exclusive)


def _ladder_option(_flag: str, value) -> tuple[int, ...]:
    return _ladder(value)


def _jitter_option(_flag: str, value) -> tuple[float, float]:
    return _jitter(value)


@dataclass(frozen=True, kw_only=True)
class ShapeSettings(OptionGroup):
    """The validated ``--shape-*`` options plus the per-user rate of the etcd users."""

    TITLE = "etcd load shapes"
    DESCRIPTION = "Load profiles of the shapes (locust-etcd --shape NAME, or shapes/NAME.py after the locustfile)"

    baseline_qps: int = option(
        "--shape-baseline-qps", 100, "StepSpikeShape: QPS of the baseline level.", parse=_whole(1)
    )
    baseline_time: int = option(
        "--shape-baseline-time",
        300,
        "StepSpikeShape: seconds the baseline is held (0: no baseline).",
        parse=_duration(0),
    )
    step_qps: int = option(
        "--shape-step-qps", 200, "StepSpikeShape: QPS added by each step after the baseline.", parse=_whole(1)
    )
    step_time: int = option(
        "--shape-step-time",
        120,
        "Seconds each step is held: the QPS steps of StepSpikeShape, the rungs of ConcurrencyLadderShape and each "
        "probe of CapacitySearchShape.",
        parse=_duration(1),
    )
    max_qps: int = option(
        "--shape-max-qps",
        2000,
        "StepSpikeShape: QPS of the last step; the final step is capped to reach it.",
        parse=_whole(1),
    )
    spike_qps: int = option(
        "--shape-spike-qps", 3000, "StepSpikeShape: QPS of the spike after the last step.", parse=_whole(1)
    )
    spike_time: int = option(
        "--shape-spike-time", 5, "StepSpikeShape: seconds the spike lasts (0: no spike).", parse=_duration(0)
    )
    ladder: tuple[int, ...] = option(
        "--shape-ladder",
        "1,200,2000,5000,10000,20000",
        "ConcurrencyLadderShape: comma-separated closed-loop user counts, one rung each.",
        parse=_ladder_option,
    )
    sine_base: float = option("--shape-sine-base", 50.0, "SineWaveShape: mean QPS of the wave.", parse=_number(0.0))
    sine_amplitude: float = option(
        "--shape-sine-amplitude", 30.0, "SineWaveShape: QPS amplitude of the wave.", parse=_number(0.0)
    )
    sine_period: int = option(
        "--shape-sine-period", 300, "SineWaveShape: seconds per cycle of the wave.", parse=_duration(1)
    )
    sine_cycles: int = option(
        "--shape-sine-cycles", 1, "SineWaveShape: cycles to run; the run lasts period x cycles.", parse=_whole(1)
    )
    sine_jitter: tuple[float, float] = option(
        "--shape-sine-jitter",
        "-8,12",
        "SineWaveShape: LOW,HIGH range of the uniform random QPS added at each re-evaluation. "
        "Write --shape-sine-jitter=-8,12 (with '=') when LOW is negative.",
        parse=_jitter_option,
    )
    sine_step: int = option(
        "--shape-sine-step", 5, "SineWaveShape: seconds between re-evaluations of the wave.", parse=_duration(1)
    )
    seed: int = option(
        "--shape-seed", 1, "Seed of the random jitter: the same seed gives the same run.", parse=_whole()
    )
    time_scale: float = option(
        "--shape-time-scale",
        1.0,
        "Multiplies every duration, e.g. 0.05 to smoke-test a 25-minute profile in about 80 s "
        "(scaled levels last at least 1 s).",
        parse=_number(0.0, exclusive=True),
    )
    warmup: int = option(
        "--shape-warmup",
        0,
        "Seconds to run the first level before the measured window; the analysis drops this window.",
        parse=_duration(0),
    )
    stop_on_breach: bool = option(
        "--shape-stop-on-breach",
        False,
        "End the run after the first level that fails its --etcd-sla gates or falls below 95% of its planned QPS "
        "(judged live on the master, once the workers' reports cover the level).",
        parse=_bool,
    )
    search_start: int = option(
        "--shape-search-start", 100, "CapacitySearchShape: QPS of the first probe.", parse=_whole(1)
    )
    search_max: int = option(
        "--shape-search-max",
        10000,
        "CapacitySearchShape: highest QPS probed; the probes double from --shape-search-start up to it.",
        parse=_whole(1),
    )
    search_rounds: int = option(
        "--shape-search-rounds",
        3,
        "CapacitySearchShape: probes that halve the bracket between the last passing and the first failing QPS.",
        parse=_whole(0, MAX_ROUNDS),
    )
    user_rate: float = 0.0
    """Requests/s of each user (``--etcd-user-rate``, the workload's option); 0 means closed loop."""

    @classmethod
    def from_options(cls, namespace: argparse.Namespace | None, **context) -> "ShapeSettings":
        """Validate parsed options (from the command line, env vars or the web UI form); missing ones take defaults."""
        return super().from_options(namespace if namespace is not None else argparse.Namespace(), **context)

    @classmethod
    def build(cls, values, namespace, **context) -> "ShapeSettings":
        settings = cls(**values, user_rate=WorkloadSettings.read_one(namespace, "user_rate"))
        if settings.max_qps < settings.baseline_qps:
            raise SettingsError(
                f"--shape-max-qps: {settings.max_qps} is below --shape-baseline-qps {settings.baseline_qps}; "
                "raise --shape-max-qps or lower the baseline"
            )
        if settings.search_max < settings.search_start:
            raise SettingsError(
                f"--shape-search-max: {settings.search_max} is below --shape-search-start {settings.search_start}; "
                "raise --shape-search-max or lower the start"
            )
        return settings


GROUP_TITLE = ShapeSettings.TITLE
OPTIONS = ShapeSettings.options()
