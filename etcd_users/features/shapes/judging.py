"""Live verdicts per level: the master (or the single process) judges each level of a run when it ends.

With ``--etcd-sla`` gates a level's window opens when its users are all running: from then on every second the
master merges (the workers' reports, or its own recorded seconds) also goes into the window's histograms
(``etcd_users.latency.windows``), one per request key, whatever the level's length. When the level ends its window
closes, and it is judged once every request made before its end is in: at once on a single process; on a master
once each worker has sent a report made after the end (they report every 3 s), or after ``WAIT_S`` without one (a
slow or lost worker: judged on what came). The window is then forgotten. Verdicts use the rules of
``analysis.levels`` (``etcd_users.judging.level_verdicts``), so the analysis prints the same ones afterwards.

Warm-up levels are not judged, nor levels whose users were never all running.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent

from etcd_users.judging.level_verdicts import LevelVerdict, judge_level, window_measurements
from etcd_users.judging.sla_specs import Gate, SlaError, member_gates, parse_gates, request_gates
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.members.member_figures import member_figures

logger = logging.getLogger("etcd_users.shapes.judging")  # the name users' log filters know

WAIT_S = 8.0
"""Longest wait after a level's end for the workers' reports that cover it (they report every 3 s)."""
POLL_S = 0.5


def live_judge(
    sla: str | None,
    recorder: LatencyRecorder | None,
    on_verdict: Callable[[int, LevelVerdict], None],
    member_rows: Callable[[], list | None] = lambda: None,
) -> LiveJudge | None:
    """The judge of a run's levels when it has gates and the tool's latency recorder; None: no level is judged.
    ``member_rows``: the members' polled rows of the run so far (None without polling), for ``member:`` gates."""
    try:
        parsed = parse_gates(sla or "")
    except SlaError:
        parsed = ()  # only the web UI's form gets here; the plugin says why at the start of the run
    gates = request_gates(parsed) + member_gates(parsed)  # disrupt: gates judge the disruptions' windows
    if not gates or recorder is None:
        return None
    return LiveJudge(recorder, gates, on_verdict, member_rows)


class LiveJudge:
    """The windows of one run's levels, judged as the data that covers them arrives."""

    def __init__(
        self,
        recorder: LatencyRecorder,
        gates: tuple[Gate, ...],
        on_verdict: Callable[[int, LevelVerdict], None],
        member_rows: Callable[[], list | None] = lambda: None,
    ) -> None:
        self.recorder = recorder
        self.gates = gates
        self.on_verdict = on_verdict
        self.member_rows = member_rows
        self._levels: dict[int, tuple[str, float | None]] = {}  # index -> (name, planned QPS), open or waiting
        self._spans: dict[int, tuple[float, float | None]] = {}  # index -> (start, end): the members' figures' span
        self._waiting: dict[int, tuple[float, float]] = {}  # index -> (the level's end, when to judge anyway)
        self._waiter: gevent.Greenlet | None = None

    @property
    def _windows(self):
        return self.recorder.store.windows  # the store's current run's (a new run replaces them)

    def open(self, index: int, name: str, planned_qps: float | None, start: float) -> None:
        """The level's users are all running since ``start``: its window begins."""
        self._levels[index] = (name, planned_qps)
        self._spans[index] = (start, None)
        self._windows.open(index, start)

    def close(self, index: int, end: float) -> None:
        """The level ended at ``end``: judge it as soon as the data up to then is in."""
        if index not in self._levels:
            return
        self._windows.close(index, end)
        self._spans[index] = (self._spans[index][0], end)
        self._waiting[index] = (end, time.monotonic() + WAIT_S)
        try:
            self.poll()
        except Exception:  # a verdict never stops the run
            logger.exception("shape: could not judge a level")
        if self._waiting and (self._waiter is None or self._waiter.dead):
            self._waiter = gevent.spawn(self._wait)

    def waiting(self, index: int) -> bool:
        """Whether the level's verdict is still to come (its window is open or waiting for data)."""
        return index in self._levels

    def tick(self) -> None:
        """Once a second while the run goes on: the first window's seconds are held apart only until the run's first
        request is known for good (a few seconds), not for the whole level."""
        if self._levels and self._windows.first_second is None:
            self._settle_first_request(self.recorder.covered_until(), final=False)

    def poll(self, final: bool = False) -> None:
        """Judge the closed levels whose data is in (all of them when ``final``: the workers' last reports are)."""
        if not self._waiting:
            return
        covered = self.recorder.covered_until()
        self._settle_first_request(covered, final)
        now = time.monotonic()
        for index, (end, deadline) in sorted(self._waiting.items()):
            complete = covered is not None and covered >= end
            if not (final or complete or now >= deadline):
                continue
            del self._waiting[index]
            if not (final or complete):
                logger.warning(
                    "shape: level '%s' judged without every worker's report past its end (waited %g s)",
                    self._levels[index][0],
                    WAIT_S,
                )
            self._judge(index)

    def finish(self) -> None:
        """Judge what is still waiting, now; stop waiting."""
        self.poll(final=True)
        self.stop()

    def stop(self) -> None:
        if self._waiter is not None and not self._waiter.dead and self._waiter is not gevent.getcurrent():
            self._waiter.kill(block=False)
        self._waiter = None

    def discard(self) -> None:
        """A new run: forget this one's windows."""
        self.stop()
        for index in self._levels:
            self._windows.take(index)
        self._levels.clear()
        self._spans.clear()
        self._waiting.clear()

    def _wait(self) -> None:
        while self._waiting:
            gevent.sleep(POLL_S)
            try:
                self.poll()
            except Exception:  # a verdict never stops the run
                logger.exception("shape: could not judge a level")
                return

    def _settle_first_request(self, covered: float | None, final: bool) -> None:
        """Windows start no earlier than the run's first request, once no worker can report an earlier one (or,
        with a worker that never says when it reported, ``WAIT_S`` after it)."""
        first = self.recorder.first_request
        windows = self._windows
        if windows.first_second is not None or first is None:
            return
        if final or (covered is not None and covered >= first) or time.time() - first > WAIT_S:
            windows.settle(first)

    def _judge(self, index: int) -> None:
        name, planned_qps = self._levels.pop(index)
        start, end = self._spans.pop(index, (None, None))
        first = self.recorder.first_request
        if self._windows.first_second is None and first is not None:
            self._windows.settle(first)  # waited long enough: the first request as known
        window = self._windows.take(index)
        if window is None:
            return
        rows = self.member_rows() if member_gates(self.gates) else None
        # the members' scrapes inside the level (a level shorter than --etcd-metrics-interval has too few of them)
        members = member_figures(rows, start, end) if rows is not None else None
        self.on_verdict(index, judge_level(name, self.gates, window_measurements(window), planned_qps, members))
