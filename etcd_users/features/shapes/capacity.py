"""CapacitySearchShape: the highest QPS etcd serves within the ``--etcd-sla`` gates, found by probing.

Each probe is a level held ``--shape-step-time`` seconds and judged live when it ends (``shapes.judging``: the
gates on the level's own exact histograms, and achieved QPS >= 95 % of planned). The probes double from
``--shape-search-start`` (capped at ``--shape-search-max``) until one fails, then ``--shape-search-rounds`` probes
bisect the bracket between the last passing and the first failing QPS. The capacity is the highest passing QPS of
the final bracket. Between a probe's end and its verdict (at once on a single process; on a master up to the
workers' next report, about 3 s) the load stays, measured by no level. QPS becomes users through
``--etcd-user-rate``, so probes closer than one user's rate are not told apart: the bisection ends there::

    locust -f locustfile.py,shapes/capacity.py --headless EtcdPutUser --etcd-user-rate 10 \\
        --etcd-sla 'put:p99<15ms' --shape-search-start 200 --shape-search-max 6400 --shape-step-time 20

The master (or the single process) decides; workers only run users. With ``--csv PREFIX`` every probe is a level of
``PREFIX_shape.json`` with its verdict, and the result goes to ``PREFIX_capacity.json``; the log ends with one
sentence (``capacity: 1400 QPS (bracket 1400-1600) under put:p99<15ms and achieved QPS >= 95% of planned``). The
run's gates are judged per probe only, not over the whole run (which mixes passing and failing probes): the search's
verdict (``exit_verdict``) makes the exit code 3 when not even the first probe passed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from etcd_users.core.exit_code import SLA_EXIT_CODE, ExitVerdict
from etcd_users.features.shapes.base import EXTENDED, FINISH, HOLD, PlannedShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import Level, probe_level, search_plan, users_for_qps
from etcd_users.features.shapes.record import write_json
from etcd_users.files import SUFFIXES
from etcd_users.judging.level_verdicts import KEEP_UP, PASS, LevelVerdict
from etcd_users.judging.sla_specs import parse_gates, request_gates
from etcd_users.settings import SettingsError

logger = logging.getLogger("shapes.capacity")  # loaded by path, the module is not named so

GROW = "grow"
BISECT = "bisect"


@dataclass
class Probe:
    qps: float
    users: int
    phase: str
    verdict: str | None = None  # PASS, FAIL, or None while running (or when it could not be judged)


@dataclass
class CapacitySearch:
    """The search's decisions, pure: which QPS to probe next from the verdicts so far."""

    start: float
    maximum: float
    rounds: int
    user_rate: float
    probes: list[Probe] = field(default_factory=list)
    low: float | None = None  # the highest passing QPS of the bracket
    high: float | None = None  # the lowest failing QPS
    done: str | None = None  # why the search ended; None while it goes on

    def first(self) -> Probe:
        return self._probe(min(self.start, self.maximum), GROW)

    def record(self, verdict: str | None) -> Probe | None:
        """The verdict of the last probe; returns the next probe, or None when the search is over (``done``)."""
        probe = self.probes[-1]
        probe.verdict = verdict
        if verdict is None:
            self.done = f"the probe at {probe.qps:g} QPS could not be judged (no whole second with its users running)"
            return None
        if verdict == PASS:
            self.low = probe.qps if self.low is None else max(self.low, probe.qps)
        else:
            self.high = probe.qps if self.high is None else min(self.high, probe.qps)
        if probe.phase == GROW:
            if verdict == PASS:
                if probe.qps >= self.maximum:
                    self.done = f"--shape-search-max {self.maximum:g} QPS passed"
                    return None
                return self._probe(min(probe.qps * 2, self.maximum), GROW)
            if self.low is None:
                self.done = "the first probe failed"
                return None
        return self._bisect()

    def _bisect(self) -> Probe | None:
        rounds = sum(1 for probe in self.probes if probe.phase == BISECT)
        if rounds >= self.rounds:
            self.done = f"{self.rounds} bisection rounds done"
            return None
        middle = float(round((self.low + self.high) / 2))
        users = users_for_qps(middle, self.user_rate)
        if not self.low < middle < self.high or users in (self._users(self.low), self._users(self.high)):
            self.done = f"the bracket is within one user's rate ({self.user_rate:g} QPS)"
            return None
        return self._probe(middle, BISECT)

    def _users(self, qps: float) -> int:
        return users_for_qps(qps, self.user_rate)

    def _probe(self, qps: float, phase: str) -> Probe:
        probe = Probe(float(qps), self._users(qps), phase)
        self.probes.append(probe)
        return probe

    @property
    def capacity(self) -> float | None:
        return self.low

    def sentence(self, under: str) -> str:
        if self.low is None and self.high is None:
            return f"capacity: not found (no probe was judged) under {under}"
        if self.low is None:
            return f"capacity: below {self.high:g} QPS (the first probe failed) under {under}"
        if self.high is None:
            return f"capacity: at least {self.low:g} QPS (no probe up to it failed) under {under}"
        return f"capacity: {self.low:g} QPS (bracket {self.low:g}–{self.high:g}) under {under}"


class CapacitySearchShape(PlannedShape):
    """Probes of rising, then bisected QPS until the capacity under the gates is bracketed."""

    dynamic = True
    judges_whole_run = False

    def __init__(self) -> None:
        super().__init__()
        self.search: CapacitySearch | None = None
        self._probe_levels: list[int] = []  # plan index of each probe
        self._reported = False

    def settings_and_plan(self, parsed_options) -> tuple[ShapeSettings, list[Level]]:
        settings, plan = super().settings_and_plan(parsed_options)
        # an option of the tool's etcd users: absent when the shape drives other users (plugin.install(etcd=False))
        text = getattr(parsed_options, "etcd_sla", "") or ""
        gates = request_gates(parse_gates(text))  # a disrupt: gate judges no probe
        if not gates:
            raise SettingsError(
                "--etcd-sla: CapacitySearchShape judges each probe by the gates; give some, "
                "for example --etcd-sla 'put:p99<15ms'"
            )
        return settings, plan

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        return search_plan(settings, type(self).__name__)

    def _start_run(self, run) -> None:
        super()._start_run(run)
        settings = self.settings
        self.search = CapacitySearch(
            settings.search_start, settings.search_max, settings.search_rounds, settings.user_rate
        )
        self.search.first()
        self._probe_levels = [len(self.plan) - 1]
        self._reported = False
        logger.info(
            "shape: capacity search from %d QPS, doubling up to %d QPS, then %d bisection rounds; %g s per probe",
            settings.search_start,
            settings.search_max,
            settings.search_rounds,
            self.plan[-1].duration_s,
        )

    def after_plan(self, t: float) -> str:
        search = self.search
        last = len(self.timeline) - 1
        if search is None:
            return FINISH
        if search.done is not None:  # decided by the last probe's verdict
            self._report()
            return FINISH
        probe_record = self.timeline[last]
        if probe_record.started_at is not None:
            self._end_level(last, time.time())  # judged at once on a single process
        if probe_record.verdict is None and self._judge is not None and self._judge.waiting(last):
            return HOLD
        if search.probes[-1].verdict is None and probe_record.verdict is None:
            search.record(None)  # never judged: its users were never all running, or it was never entered
        if search.done is not None:
            self._report()
            return FINISH
        probe = search.probes[-1]
        number = len(search.probes)
        previous = probe_record.level.users
        self.append_level(probe_level(f"probe {number}", t, self.settings, probe.qps, previous))
        self._probe_levels.append(len(self.timeline) - 1)
        return EXTENDED

    def on_verdict(self, index: int, verdict: LevelVerdict) -> None:
        if self.search is None or not self._probe_levels or index != self._probe_levels[-1]:
            return
        if self.search.done is None and self.search.probes[-1].verdict is None:
            self.search.record(verdict.verdict)
            self._write_capacity()

    def judge_remaining_levels(self) -> None:
        super().judge_remaining_levels()
        self._report()

    # -- the result --

    def _under(self) -> str:
        gates = ",".join(gate.text for gate in self._judge.gates) if self._judge is not None else self._sla or ""
        keep_up = f"achieved QPS >= {100 * KEEP_UP:g}% of planned"
        return f"{gates} and {keep_up}" if gates else keep_up

    def capacity_record(self) -> dict:
        """What ``PREFIX_capacity.json`` holds."""
        search = self.search
        probes = []
        for probe, index in zip(search.probes, self._probe_levels, strict=False):
            level = self.timeline[index]
            verdict = level.verdict
            probes.append(
                {
                    "level": level.level.name,
                    "qps": probe.qps,
                    "users": probe.users,
                    "phase": probe.phase,
                    "verdict": probe.verdict,
                    "achieved_qps": None if verdict is None else verdict.achieved_qps,
                    "checks": level.checks_json(),
                }
            )
        return {
            "shape": type(self).__name__,
            "gates": [gate.text for gate in self._judge.gates] if self._judge is not None else [],
            "keep_up": KEEP_UP,
            "user_rate": self.settings.user_rate,
            "capacity_qps": search.capacity,
            "bracket": {"low": search.low, "high": search.high},
            "complete": search.done is not None and self._stop_reason is None,
            "ended_because": search.done or self._stop_reason,
            "summary": search.sentence(self._under()),
            "probes": probes,
        }

    def _report(self) -> None:
        """Once per run: the sentence in the log and the file."""
        if self._reported or self.search is None:
            return
        self._reported = True
        if self.search.done is None:
            self.search.done = self._stop_reason or "the run ended before the search did"
        logger.info("%s", self.search.sentence(self._under()))
        self._write_capacity()

    def exit_verdict(self) -> ExitVerdict | None:
        """Exit code 3 when the search ended without a capacity: not even the first probe passed."""
        if self.search is None or self.search.done is None or self.search.capacity is not None:
            return None
        return ExitVerdict(SLA_EXIT_CODE, f"the capacity search found no QPS within {self._under()}")

    def _write_capacity(self) -> None:
        options = self.parsed_options
        if options is None or not options.csv_prefix or self.search is None:
            return
        path = Path(options.csv_prefix + SUFFIXES["capacity"])
        try:
            write_json(path, self.capacity_record())
        except OSError as error:
            logger.warning("shape: cannot write %s (%s)", path, error.strerror)
