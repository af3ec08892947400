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
per level, its ``verdict`` and ``checks`` in the record, ``on_breach`` at the run's first failing level, and with
``--shape-stop-on-breach`` the run ends there. A subclass may grow its plan during the run (``after_plan``).

The shape ticks and delegates: the plan is ``shapes.plan``'s, the levels as they run are ``shapes.timeline``'s, the
verdicts ``shapes.judging``'s and the file ``shapes.record``'s. The tool reaches it through ``judged_shape``.
"""

from locust import LoadTestShape
from locust.stats import StatsError

import logging
import time
from abc import abstractmethod
from collections.abc import Callable

from etcd_users.core.exit_code import ExitVerdict
from etcd_users.features.shapes.judging import LiveJudge, live_judge
from etcd_users.features.shapes.options import SettingsError, ShapeSettings
from etcd_users.features.shapes.plan import Level, format_plan, plan_duration
from etcd_users.features.shapes.record import record_path, shape_record, write_json
from etcd_users.features.shapes.timeline import ErrorCounts, Timeline
from etcd_users.judging.level_verdicts import FAIL, LevelVerdict
from etcd_users.latency.recorder import LatencyRecorder

logger = logging.getLogger("etcd_users.shapes.base")  # the name users' log filters know

QUANTISATION_WARNING = 0.1
"""Warn when rounding QPS up to whole users overshoots a level's target by more than this share."""

_NOT_STARTED = object()
FINISH = "finish"
"""``after_plan``: the plan is over."""
HOLD = "hold"
"""``after_plan``: keep the last level's load, no level running, until the next tick."""
EXTENDED = "extended"
"""``after_plan``: levels were appended; the one at the current time runs."""


def _no_breach(_line: str) -> None:
    """``on_breach`` until the tool gives one: a breach sets nothing off."""


def _no_member_rows() -> None:
    """``member_rows`` until the tool gives one: no members polled, ``member:`` gates not judged per level."""


class PlannedShape(LoadTestShape):
    """Runs ``build_plan(settings)`` level by level and stops after the last level (``judged_shape.JudgedShape``).

    A shape of your own subclasses it and returns its levels from ``build_plan``; the base does the rest: it logs each
    level as it starts, writes ``PREFIX_shape.json`` with ``--csv PREFIX``, judges each level against ``--etcd-sla``
    as it ends, and stops the run after the last level. Locust calls ``tick()`` about once a second on the master (or
    the single process); a subclass does not override it. ``examples/custom_shape.py`` is a complete one.
    """

    abstract = True
    judges_whole_run = True
    """False: the run's ``--etcd-sla`` gates are judged per level only, not also over the whole run at its end."""
    dynamic = False
    """True: the plan grows during the run (``after_plan``), its total is not known in advance."""

    def __init__(self) -> None:
        super().__init__()
        self.settings: ShapeSettings | None = None
        self.timeline = Timeline()
        self.recorder: LatencyRecorder | None = None
        self.on_breach: Callable[[str], None] = _no_breach
        self.member_rows: Callable[[], list | None] = _no_member_rows
        self._run = _NOT_STARTED
        self._index: int | None = None
        self._ended_with: tuple[float, ErrorCounts] | None = None  # when the last level ended, and its failures then
        self._judge: LiveJudge | None = None
        self._stop_reason: str | None = None
        self._breached = False
        self._sla: str | None = None
        self._json_failed = False
        self._listening = False

    @abstractmethod
    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        """The levels of this profile; raises SettingsError for settings it cannot run."""

    def after_plan(self, t: float) -> str:
        """What happens at run time ``t`` past the plan's last level: FINISH, HOLD or EXTENDED (after appending
        levels that start at ``t``). A fixed plan finishes."""
        return FINISH

    def append_level(self, level: Level) -> None:
        """Add a level to the running plan (from ``after_plan``)."""
        self.timeline.append(level)

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
        except SettingsError as error:
            return str(error)
        return None

    def settings_and_plan(self, parsed_options) -> tuple[ShapeSettings, list[Level]]:
        """Validate the options and build the plan without starting anything."""
        settings = ShapeSettings.from_options(parsed_options)
        return settings, self.build_plan(settings)

    @property
    def plan(self) -> list[Level]:
        """The current run's levels (growing with ``append_level``); empty before the first run."""
        return self.timeline.plan

    @property
    def parsed_options(self):
        """The run's options (Locust's and the tool's); None before Locust gives the shape its runner, and when
        Locust runs as a library without options."""
        return None if self.runner is None else self.runner.environment.parsed_options

    @property
    def current_level(self) -> Level | None:
        """The level running now; None before the first level and after the last."""
        return None if self._index is None else self.timeline[self._index].level

    def describe_plan(self) -> str:
        """The plan as a text table (built from the current options if no run has started)."""
        if self.settings is None:
            settings, plan = self.settings_and_plan(self.parsed_options)
        else:
            settings, plan = self.settings, self.plan
        return format_plan(plan, settings.user_rate)

    def tick(self) -> tuple[int, float] | None:
        # start_shape() spawns a new shape greenlet per run: a new one means a new run with fresh options
        run = self.runner.shape_greenlet
        if run is not self._run:
            try:
                self._start_run(run)
            except SettingsError as error:
                logger.error("%s", error)
                return None
        t = self.get_run_time()
        if self._judge is not None:
            self._judge.tick()
        if self._stop_reason is not None:
            self._finish(t)
            return None
        timeline = self.timeline
        index = timeline.index_at(t)
        while index is None and timeline.ended_at is None:
            action = self.after_plan(t)
            if action == HOLD and self._index is not None:
                if timeline[self._index].ended_at is None:
                    self._end_level(self._index, time.time())
                    self._write_record()
                level = timeline[self._index].level
                return level.users, level.spawn_rate
            if action != EXTENDED:
                break
            index = timeline.index_at(t)
        if index is None or self._stop_reason is not None:
            self._finish(t)
            return None
        level = timeline[index].level
        if index != self._index:
            if self._index is not None:
                self._end_level(self._index, time.time())
            if self._stop_reason is not None:  # the level just ended failed (judged at once on a single process)
                self._finish(t)
                return None
            self._enter(index, t)
        elif timeline[index].running_at is None and self.runner.user_count == level.users:
            # the master's spawning_complete can fire before every worker reported its users: then the tick tells
            self._mark_running(index, time.time())
            self._write_record()
        return level.users, level.spawn_rate

    def _start_run(self, run) -> None:
        settings, plan = self.settings_and_plan(self.parsed_options)
        self.settings = settings
        self._run = run
        self._index = None
        self._ended_with = None
        self._stop_reason = None
        self._breached = False
        # an option of the tool's etcd users: absent when the shape drives other users (plugin.install(etcd=False))
        self._sla = getattr(self.parsed_options, "etcd_sla", None) or None
        if self._judge is not None:
            self._judge.discard()
        self._judge = live_judge(self._sla, self.recorder, self._judged, self.member_rows)
        self.timeline = Timeline(plan, started_at=time.time() - self.get_run_time())
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

    def _judged(self, index: int, verdict: LevelVerdict) -> None:
        self.timeline[index].verdict = verdict
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
            self.on_breach(line)
        if self.settings is not None and self.settings.stop_on_breach and self._stop_reason is None:
            if self.timeline.ended_at is None:  # the next tick ends the run
                self._stop_reason = f"level '{verdict.name}' failed (--shape-stop-on-breach)"

    def judge_remaining_levels(self) -> None:
        """The run ends (Locust's quitting, the workers' last reports merged): end the running level and judge every
        level still waiting."""
        if self._run is _NOT_STARTED or self.settings is None:
            return
        if self.timeline.ended_at is None:
            self._finish(self.get_run_time(), "the run was stopped before the plan's end")
        if self._judge is not None:
            self._judge.finish()

    def exit_verdict(self) -> ExitVerdict | None:
        """The shape's own verdict on the run's exit code (``etcd_users.core.exit_code``), or None. A plan of levels
        does not fail the run by itself (its ``--etcd-sla`` gates on the whole run do); the capacity search fails it
        with 3 when no level held its gates."""
        return None

    def _listen(self) -> None:
        """Hear Locust's ``spawning_complete`` (once per shape: the listener serves every later run too)."""
        if not self._listening:
            self.runner.environment.events.spawning_complete.add_listener(self._on_spawning_complete)
            self._listening = True

    def _on_spawning_complete(self, user_count: int, **_kwargs) -> None:
        """The runner reached ``user_count`` users: if that is the current level's count, the level is running."""
        index = self._index
        if index is None or self.timeline.ended_at is not None or self.timeline[index].running_at is not None:
            return
        users = self.timeline[index].level.users
        # on a master the count is the workers' as reported: short of it while some reports are still to come
        if user_count == users and self.runner.user_count == users:
            self._mark_running(index, time.time())
            self._write_record()

    def _mark_running(self, index: int, when: float, counted: tuple[float, ErrorCounts] | None = None) -> None:
        """The level's users are all running: its failures count from here (``counted``: the counts the previous
        level ended with, when this one needs no spawning)."""
        when, errors = counted or self._error_counts_at(when)
        self.timeline.mark_running(index, when, errors)
        level = self.timeline[index].level
        logger.debug("shape: all %d users of level '%s' running", level.users, level.name)
        if self._judge is not None and not level.warmup:
            self._judge.open(index, level.name, level.qps, when)

    def _end_level(self, index: int, when: float) -> None:
        """The level ends (once): its failures counted, its window closed for its verdict."""
        when, errors = self._error_counts_at(when)
        if self.timeline.end(index, when, errors):
            self._ended_with = (when, errors)
            if self._judge is not None:
                self._judge.close(index, when)

    def _error_counts_at(self, when: float) -> tuple[float, ErrorCounts]:
        """Locust's failures until about ``when``, and the time they count until: the requests reported in batches
        (the loop engine's) are applied first, and the count holds exactly those that ended before the time returned,
        so that no failure falls between two levels."""
        if self.recorder is not None:
            when = self.recorder.apply_pending()
        return when, self._error_counts()

    def _error_counts(self) -> ErrorCounts:
        """Locust's failures so far by request name and error text (on a master: its workers' merged)."""
        counts: ErrorCounts = {}
        for entry in list(self.runner.stats.errors.values()):
            key = (entry.name, StatsError.parse_error(entry.error))
            counts[key] = counts.get(key, 0) + entry.occurrences
        return counts

    def _enter(self, index: int, t: float) -> None:
        previous = self._index
        level = self.timeline[index].level
        contiguous = (
            previous is not None
            and self.timeline[previous].running_at is not None
            and self.timeline[previous].level.users == level.users
            and self._ended_with is not None
        )
        # nothing to spawn: the level begins, its users all running, where the previous one ended
        now = self._ended_with[0] if contiguous else time.time()
        self._index = index
        self.timeline.enter(index, now)
        if contiguous:
            self._mark_running(index, now, self._ended_with)
        total = "" if self.dynamic else f"/{len(self.timeline)}"
        logger.info("shape: level %d%s '%s' at %.1fs: %s", index + 1, total, level.name, t, self._load_text(level))
        self._write_record()

    def _finish(self, t: float, reason: str | None = None) -> None:
        if self.timeline.ended_at is not None:
            return
        now = time.time()
        self._stop_reason = self._stop_reason or reason
        self.timeline.ended_at = now  # first: the last level's verdict, if it comes at once, stops nothing
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
        """What ``PREFIX_shape.json`` holds (``shapes.record``)."""
        user_rate = self.settings.user_rate if self.settings else None
        return shape_record(type(self).__name__, self.timeline, user_rate, self._sla, self._stop_reason)

    def _write_record(self) -> None:
        options = self.parsed_options
        if options is None or not options.csv_prefix:
            return
        path = record_path(options.csv_prefix)
        try:
            write_json(path, self.shape_record())
        except OSError as error:
            if not self._json_failed:
                logger.warning("shape: cannot write %s (%s); the run goes on without it", path, error.strerror)
            self._json_failed = True
