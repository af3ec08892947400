"""``PlannedShape``: the abstract LoadTestShape that runs a precomputed plan of levels.

Locust calls ``tick()`` about once a second on the master (or the local runner), never on workers. The plan
is built from ``--shape-*`` options on the first tick of each run, so values edited in the web UI apply to
the next run. With ``--csv PREFIX`` the plan, the time each level was entered and the time its users were all
running go to ``PREFIX_shape.json`` for the analysis (to drop the warm-up, and to measure and judge each level over
its steady part: ``python -m analysis PREFIX`` prints a table per level).

A level's ``running_at`` is taken from Locust's ``spawning_complete`` event, not from ``tick()``: the event fires
the moment the runner has spawned (or stopped) the last user of the count the tick asked for (on the master, once
every worker has reported its users), where a tick would see it up to a second late. The master also fires it when
the workers' reports do not come in time; then the runner's user count is still short, and the first tick that sees
it complete marks the level (up to a second late, so its window only gets shorter). A level whose users equal the
previous level's, already all running, is running from its entry. The failure labels Locust counted between that
moment and the level's end (``ended_at``) go with it (``errors``), since Locust's own failures file is not split in
time.

With ``--etcd-sla`` each level that is not a warm-up is judged live when it ends (``shapes.judging``): one log line
per level, its ``verdict`` and ``checks`` in the record, ``EtcdPlugin.on_breach`` at the run's first failing level,
and with ``--shape-stop-on-breach`` the run ends there. A subclass may grow its plan during the run (``after_plan``).
"""

from locust import LoadTestShape, events
from locust.runners import WorkerRunner
from locust.stats import StatsError

import json
import logging
import os
import sys
import time
from abc import abstractmethod
from pathlib import Path

from etcd_users.plugin import installed
from etcd_users.reporting.level_verdicts import FAIL, LevelVerdict
from etcd_users.settings import SlaError, parse_gates
from etcd_users.shapes.judging import LiveJudge
from etcd_users.shapes.options import ShapeSettings, ShapeSettingsError
from etcd_users.shapes.plan import Level, format_plan, level_index_at, plan_duration

logger = logging.getLogger(__name__)

QUANTISATION_WARNING = 0.1
"""Warn when rounding QPS up to whole users overshoots a level's target by more than this share."""
RECORDED_ERRORS = 20
"""The most frequent failure labels kept per level in the record."""

_NOT_STARTED = object()
FINISH = "finish"
"""``after_plan``: the plan is over."""
HOLD = "hold"
"""``after_plan``: keep the last level's load, no level running, until the next tick."""
EXTENDED = "extended"
"""``after_plan``: levels were appended; the one at the current time runs."""


class PlannedShape(LoadTestShape):
    """Runs ``build_plan(settings)`` level by level and stops after the last level."""

    abstract = True
    judges_whole_run = True
    """False: the run's ``--etcd-sla`` gates are judged per level only, not also over the whole run at its end."""
    dynamic = False
    """True: the plan grows during the run (``after_plan``), its total is not known in advance."""

    def __init__(self) -> None:
        super().__init__()
        self.settings: ShapeSettings | None = None
        self.plan: list[Level] = []
        self._run = _NOT_STARTED
        self._index: int | None = None
        self._entered_at: list[float | None] = []
        self._running_at: list[float | None] = []
        self._errors_at_running: list[dict[tuple[str, str], int] | None] = []
        self._level_errors: list[list[dict] | None] = []
        self._ended_level_at: list[float | None] = []
        self._verdicts: list[LevelVerdict | None] = []
        self._judge: LiveJudge | None = None
        self._stop_reason: str | None = None
        self._breached = False
        self._sla: str | None = None
        self._started_at: float | None = None
        self._ended_at: float | None = None
        self._json_failed = False
        self._listening = False

    @abstractmethod
    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        """The levels of this profile; raises ShapeSettingsError for settings it cannot run."""

    def after_plan(self, t: float) -> str:
        """What happens at run time ``t`` past the plan's last level: FINISH, HOLD or EXTENDED (after appending
        levels that start at ``t``). A fixed plan finishes."""
        return FINISH

    def append_level(self, level: Level) -> None:
        """Add a level to the running plan (from ``after_plan``)."""
        self.plan.append(level)
        for per_level in (
            self._entered_at,
            self._running_at,
            self._errors_at_running,
            self._level_errors,
            self._ended_level_at,
            self._verdicts,
        ):
            per_level.append(None)

    def on_verdict(self, index: int, verdict: LevelVerdict) -> None:
        """A level was judged live (``shape_record()`` has its verdict already); for subclasses that decide on it."""

    def plan_warnings(self, settings: ShapeSettings, plan: list[Level]) -> list[str]:
        """One-line warnings logged when a run starts."""
        worst = max(
            (level for level in plan if level.qps),
            key=lambda level: level.users * settings.user_rate / level.qps,
            default=None,
        )
        if worst is None or worst.users * settings.user_rate <= worst.qps * (1 + QUANTISATION_WARNING):
            return []
        offered = worst.users * settings.user_rate
        return [
            f"shape: at --etcd-user-rate {settings.user_rate:g} each user adds {settings.user_rate:g} QPS, so level "
            f"'{worst.name}' offers {offered:g} QPS for a target of {worst.qps:g} "
            f"(+{100 * (offered / worst.qps - 1):.0f}%); a smaller rate gives finer levels"
        ]

    def options_error(self, parsed_options) -> str | None:
        """What is wrong with the options for this shape, in one line; None when it can run."""
        try:
            self.settings_and_plan(parsed_options)
        except ShapeSettingsError as error:
            return str(error)
        return None

    def settings_and_plan(self, parsed_options) -> tuple[ShapeSettings, list[Level]]:
        """Validate the options and build the plan without starting anything."""
        settings = ShapeSettings.from_options(parsed_options)
        return settings, self.build_plan(settings)

    @property
    def parsed_options(self):
        environment = getattr(self.runner, "environment", None)
        return getattr(environment, "parsed_options", None)

    @property
    def current_level(self) -> Level | None:
        return None if self._index is None else self.plan[self._index]

    def describe_plan(self) -> str:
        """The plan as a text table (built from the current options if no run has started)."""
        if self.settings is None:
            settings, plan = self.settings_and_plan(self.parsed_options)
        else:
            settings, plan = self.settings, self.plan
        return format_plan(plan, settings.user_rate)

    def tick(self) -> tuple[int, float] | None:
        # start_shape() spawns a new shape greenlet per run: a new one means a new run with fresh options
        run = getattr(self.runner, "shape_greenlet", None)
        if run is not self._run:
            try:
                self._start_run(run)
            except ShapeSettingsError as error:
                logger.error("%s", error)
                return None
        t = self.get_run_time()
        if self._judge is not None:
            self._judge.tick()
        if self._stop_reason is not None:
            self._finish(t)
            return None
        index = level_index_at(self.plan, t)
        while index is None and self._ended_at is None:
            action = self.after_plan(t)
            if action == HOLD and self._index is not None:
                if self._ended_level_at[self._index] is None:
                    self._end_level(self._index, time.time())
                    self._write_record()
                level = self.plan[self._index]
                return level.users, level.spawn_rate
            if action != EXTENDED:
                break
            index = level_index_at(self.plan, t)
        if index is None or self._stop_reason is not None:
            self._finish(t)
            return None
        if index != self._index:
            if self._index is not None:
                self._end_level(self._index, time.time())
            if self._stop_reason is not None:  # the level just ended failed (judged at once on a single process)
                self._finish(t)
                return None
            self._enter(index, t)
        elif self._running_at[index] is None and self._runner_users() == self.plan[index].users:
            # the master's spawning_complete can fire before every worker reported its users: then the tick tells
            self._mark_running(index, time.time())
            self._write_record()
        level = self.plan[index]
        return level.users, level.spawn_rate

    def _start_run(self, run) -> None:
        settings, plan = self.settings_and_plan(self.parsed_options)
        self.settings, self.plan = settings, plan
        self._run = run
        self._index = None
        self._entered_at = [None] * len(plan)
        self._running_at = [None] * len(plan)
        self._errors_at_running = [None] * len(plan)
        self._level_errors = [None] * len(plan)
        self._ended_level_at = [None] * len(plan)
        self._verdicts = [None] * len(plan)
        self._stop_reason = None
        self._breached = False
        self._sla = getattr(self.parsed_options, "etcd_sla", None) or None
        self._start_judging()
        self._started_at = time.time() - self.get_run_time()
        self._ended_at = None
        self._listen()
        rate = f"{settings.user_rate:g} requests/s per user" if settings.user_rate > 0 else "closed-loop users"
        if not self.dynamic:  # a growing plan says what it will do itself
            logger.info(
                "shape: %s plan: %d levels, %g s, %s", type(self).__name__, len(plan), plan_duration(plan), rate
            )
        logger.debug("shape: plan\n%s", format_plan(plan, settings.user_rate))
        for warning in self.plan_warnings(settings, plan):
            logger.warning("%s", warning)
        self._write_record()

    def _start_judging(self) -> None:
        """Judge each level live when the run has gates and the tool's latency recorder (``etcd_users.plugin``)."""
        if self._judge is not None:
            self._judge.discard()
            self._judge = None
        try:
            gates = parse_gates(self._sla or "")
        except SlaError:
            gates = ()  # only the web UI's form gets here; the plugin says why at the start of the run
        plugin = installed(getattr(getattr(self.runner, "environment", None), "events", None))
        if gates and plugin is not None:
            self._judge = LiveJudge(plugin.recorder, gates, self._judged)

    def _judged(self, index: int, verdict: LevelVerdict) -> None:
        self._verdicts[index] = verdict
        line = verdict.line()
        if verdict.verdict == FAIL:
            logger.warning("%s", line)
        else:
            logger.info("%s", line)
        self.on_verdict(index, verdict)
        self._write_record()
        if verdict.verdict != FAIL:
            return
        if not self._breached:
            self._breached = True
            plugin = installed(getattr(getattr(self.runner, "environment", None), "events", None))
            on_breach = getattr(plugin, "on_breach", None)
            if on_breach is not None:
                on_breach(line)
        if self.settings is not None and self.settings.stop_on_breach and self._stop_reason is None:
            if self._ended_at is None:  # the next tick ends the run
                self._stop_reason = f"level '{verdict.name}' failed (--shape-stop-on-breach)"

    def judge_remaining_levels(self) -> None:
        """The run ends (Locust's quitting, the workers' last reports merged): end the running level and judge every
        level still waiting."""
        if self._run is _NOT_STARTED or self.settings is None:
            return
        if self._ended_at is None:
            self._finish(self.get_run_time(), "the run was stopped before the plan's end")
        if self._judge is not None:
            self._judge.finish()

    def _listen(self) -> None:
        """Hear Locust's ``spawning_complete`` (once per shape: the listener serves every later run too)."""
        event = getattr(getattr(getattr(self.runner, "environment", None), "events", None), "spawning_complete", None)
        if self._listening or event is None:
            return
        event.add_listener(self._on_spawning_complete)
        self._listening = True

    def _on_spawning_complete(self, user_count: int, **_kwargs) -> None:
        """The runner reached ``user_count`` users: if that is the current level's count, the level is running."""
        index = self._index
        if index is None or self._ended_at is not None or self._running_at[index] is not None:
            return
        users = self.plan[index].users
        if user_count == users and self._runner_users() in (None, users):
            self._mark_running(index, time.time())
            self._write_record()

    def _runner_users(self) -> int | None:
        """The users the runner has (on the master: as its workers reported them); None when it cannot tell."""
        count = getattr(self.runner, "user_count", None)
        return count if isinstance(count, int) else None

    def _mark_running(self, index: int, when: float) -> None:
        self._running_at[index] = when
        self._errors_at_running[index] = self._error_counts()
        level = self.plan[index]
        logger.debug("shape: all %d users of level '%s' running", level.users, level.name)
        if self._judge is not None and not level.warmup:
            self._judge.open(index, level.name, level.qps, when)

    def _end_level(self, index: int, when: float) -> None:
        """The level ends (once): its failures counted, its window closed for its verdict."""
        if self._ended_level_at[index] is not None:
            return
        self._ended_level_at[index] = when
        self._close_level(index)
        if self._judge is not None:
            self._judge.close(index, when)

    def _close_level(self, index: int | None) -> None:
        """Record the failures counted from the level's users all running to now, its end."""
        if index is None or self._errors_at_running[index] is None:
            return
        now = self._error_counts()
        if now is None:
            return
        before = self._errors_at_running[index]
        grown = [(key, count - before.get(key, 0)) for key, count in now.items() if count > before.get(key, 0)]
        grown.sort(key=lambda item: (-item[1], item[0]))
        self._level_errors[index] = [
            {"name": name, "error": error, "occurrences": count} for (name, error), count in grown[:RECORDED_ERRORS]
        ]

    def _error_counts(self) -> dict[tuple[str, str], int] | None:
        """Locust's failures so far by request name and error text (the master's merged stats); None without stats."""
        errors = getattr(getattr(self.runner, "stats", None), "errors", None)
        if errors is None:
            return None
        counts: dict[tuple[str, str], int] = {}
        for entry in list(errors.values()):
            key = (entry.name, StatsError.parse_error(entry.error))
            counts[key] = counts.get(key, 0) + entry.occurrences
        return counts

    def _enter(self, index: int, t: float) -> None:
        previous = self._index
        now = time.time()
        self._index = index
        self._entered_at[index] = now
        level = self.plan[index]
        if previous is not None and self._running_at[previous] is not None and self.plan[previous].users == level.users:
            self._mark_running(index, now)  # nothing to spawn: its users are already all running
        total = "" if self.dynamic else f"/{len(self.plan)}"
        logger.info("shape: level %d%s '%s' at %.1fs: %s", index + 1, total, level.name, t, self._load_text(level))
        self._write_record()

    def _finish(self, t: float, reason: str | None = None) -> None:
        if self._ended_at is not None:
            return
        now = time.time()
        self._stop_reason = self._stop_reason or reason
        self._ended_at = now  # first: the last level's verdict, if it comes at once, stops nothing
        if self._index is not None:
            self._end_level(self._index, now)
        self._index = None
        if self._stop_reason is None:
            logger.info("shape: plan complete at %.1fs, stopping", t)
        else:
            logger.info("shape: stopped at %.1fs: %s", t, self._stop_reason)
        self._write_record()

    def _load_text(self, level: Level) -> str:
        rate = self.settings.user_rate if self.settings else 0.0
        if level.qps is None:
            load = f"{level.users} users (closed loop)"
        else:
            load = f"{level.qps:g} QPS = {level.users} users @ {rate:g}/s/user"
        load += f", spawn rate {level.spawn_rate:g}/s"
        return load + (" (warm-up, not measured)" if level.warmup else "")

    def shape_record(self) -> dict:
        """What ``PREFIX_shape.json`` holds: the plan, when the run started, the run's ``--etcd-sla`` gates, and per
        level when it was entered (``started_at``), when its users were all running (``running_at``, None until
        then), when it ended (``ended_at``), the failure labels Locust counted from its users all running to its end
        (``errors``, None until it ends), and its live ``verdict`` ("pass", "FAIL", or None when not judged) with the
        ``checks`` it was judged by (``gate``, ``passed``, ``measured``, ``line``). ``stopped`` says why a run ended
        before its plan did."""
        return {
            "shape": type(self).__name__,
            "started_at": self._started_at,
            "warmup_end": self._warmup_end(),
            "ended_at": self._ended_at,
            "user_rate": self.settings.user_rate if self.settings else None,
            "sla": self._sla,
            "stopped": self._stop_reason,
            "levels": [
                {
                    **level.to_dict(),
                    "started_at": entered,
                    "running_at": running,
                    "ended_at": ended,
                    "errors": errors,
                    "verdict": None if verdict is None else verdict.verdict,
                    "checks": [] if verdict is None else [check.to_dict() for check in verdict.checks],
                }
                for level, entered, running, ended, errors, verdict in zip(
                    self.plan,
                    self._entered_at,
                    self._running_at,
                    self._ended_level_at,
                    self._level_errors,
                    self._verdicts,
                    strict=True,
                )
            ],
        }

    def _warmup_end(self) -> float | None:
        """When the measured window starts: entry of the first measured level, else its planned start."""
        first_measured = next((i for i, level in enumerate(self.plan) if not level.warmup), None)
        if first_measured in (None, 0) or self._started_at is None:
            return None
        entered = self._entered_at[first_measured]
        return entered if entered is not None else self._started_at + self.plan[first_measured].start_s

    def _write_record(self) -> None:
        prefix = getattr(self.parsed_options, "csv_prefix", None)
        if not prefix:
            return
        path = Path(f"{prefix}_shape.json")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".tmp")
            partial.write_text(json.dumps(self.shape_record(), indent=2) + "\n")
            os.replace(partial, path)  # readers never see a half-written file
        except OSError as error:
            if not self._json_failed:
                logger.warning("shape: cannot write %s (%s); the run goes on without it", path, error.strerror)
            self._json_failed = True


@events.init.add_listener
def _validate_selected_shape(environment, **_kwargs) -> None:
    """Refuse bad ``--shape-*`` options at start-up instead of at the first tick."""
    shape = environment.shape_class
    if not isinstance(shape, PlannedShape) or isinstance(environment.runner, WorkerRunner):
        return  # workers get the master's options later and never tick
    if getattr(environment.parsed_options, "class_picker", False):
        return  # the shape is picked in the web UI; tick() validates it then
    try:
        shape.settings_and_plan(environment.parsed_options)
    except ShapeSettingsError as error:
        sys.stderr.write(f"locust-etcd: error: {error}\n")
        sys.exit(2)
