"""Windows of whole seconds whose merged histograms are kept while the run goes on: a load shape's levels, judged live.

The store feeds every second it merges (a worker's report, or its own recorded seconds) to ``Windows.add``; each
open window merges the seconds that fall inside it into one histogram per key, so a window costs one histogram per
(type, name, series) however long it lasts, and nothing once taken. Pure: no Locust.

A window covers the whole seconds [T, T+1) from its start (the level's users all running) to its end (the level's
end), as ``analysis.levels`` measures a level: ``first_second``/``end_second``. A report can carry the first part of
the current second (a worker ships what it recorded so far), which lies after the end if the level ends within that
second: the current second is held apart until it is over or the window closes. A window also starts no earlier than
the run's first request (users spawned are not sending yet while their ``on_start`` connects), which only the master
knows for sure once every worker has reported past it: until ``settle`` is called, a window holds its seconds apart
(a few seconds at most, the time of one worker report).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from etcd_users import hdr

EDGE_S = 0.001
"""Times in the files have millisecond precision: a window ending at 22.9995 s ends at the 23rd second."""

Key = tuple[str, str, str]  # (request type, name, series)


def first_whole_second(start: float) -> int:
    return math.ceil(start - EDGE_S)


def end_whole_second(end: float) -> int:
    """The first second not inside a window ending at ``end``."""
    return math.floor(end + EDGE_S)


@dataclass
class WindowData:
    """What a window holds: per key the merged histogram of its successful requests and its failure count."""

    first_second: int
    end_second: int | None = None  # exclusive; None while the window is open
    histograms: dict[Key, HdrHistogram] = field(default_factory=dict)
    failures: dict[Key, int] = field(default_factory=dict)
    # seconds not merged yet, second -> (histograms, failures): the current second while the window is open (part of
    # it may come after the end), and every second until the run's first request is settled (``settled``)
    held: dict[int, tuple[dict[Key, HdrHistogram], dict[Key, int]]] = field(default_factory=dict)
    settled: bool = True

    @property
    def seconds(self) -> int:
        """Whole seconds inside the window (once it is closed)."""
        if self.end_second is None:
            return 0
        return max(0, self.end_second - self.first_second)

    def holds(self, second: int) -> bool:
        return second >= self.first_second and (self.end_second is None or second < self.end_second)

    def _hold(self, second: int) -> tuple[dict[Key, HdrHistogram], dict[Key, int]]:
        return self.held.setdefault(second, ({}, {}))

    def _merge_held(self, now: float) -> None:
        """Merge the held seconds that are sure to be inside: complete ones, or all once the end is known."""
        if not self.settled or not self.held:
            return
        current = int(now)
        for second in [second for second in self.held if self.end_second is not None or second < current]:
            histograms, failures = self.held.pop(second)
            if self.holds(second):
                for key, histogram in histograms.items():
                    _add(self.histograms, key, histogram)
                for key, count in failures.items():
                    self.failures[key] = self.failures.get(key, 0) + count


def _add(histograms: dict[Key, HdrHistogram], key: Key, histogram: HdrHistogram) -> None:
    merged = histograms.get(key)
    if merged is None:
        merged = histograms[key] = hdr.new_histogram()
    merged.add(histogram)


class Windows:
    """The open windows of one run, by a caller's token (a level's index). ``clock``: the wall clock of the seconds."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._windows: dict[object, WindowData] = {}
        self.first_second: int | None = None  # the run's first request's second, once settled

    def __len__(self) -> int:
        return len(self._windows)

    def open(self, token: object, start: float) -> None:
        """Start merging the seconds from ``start`` (unix time) on."""
        first = first_whole_second(start)
        if self.first_second is not None:
            self._windows[token] = WindowData(max(first, self.first_second))
        else:
            self._windows[token] = WindowData(first, settled=False)

    def close(self, token: object, end: float) -> None:
        """No second from ``end`` on belongs to the window. The second the end falls in is still held, so the part
        of it recorded before the end is left out with the rest."""
        window = self._windows.get(token)
        if window is None:
            return
        window.end_second = end_whole_second(end)
        window._merge_held(self._clock())

    def settle(self, first_request: float) -> None:
        """The run's first request is known for good: windows start no earlier than its whole second."""
        if self.first_second is not None:
            return
        self.first_second = first_whole_second(first_request)
        now = self._clock()
        for window in self._windows.values():
            window.first_second = max(window.first_second, self.first_second)
            window.settled = True
            window._merge_held(now)

    def add(self, second: int, key: Key, histogram: HdrHistogram) -> None:
        if not self._windows:
            return
        now = self._clock()
        for window in self._windows.values():
            if window.holds(second):
                _add(window._hold(second)[0], key, histogram)
                window._merge_held(now)

    def add_failures(self, second: int, key: Key, count: int) -> None:
        if not self._windows:
            return
        now = self._clock()
        for window in self._windows.values():
            if window.holds(second):
                failures = window._hold(second)[1]
                failures[key] = failures.get(key, 0) + count
                window._merge_held(now)

    def take(self, token: object) -> WindowData | None:
        """The window's data, forgotten here; None when it was never opened. A window whose run never settled its
        first request (no request reached the store) holds nothing."""
        window = self._windows.pop(token, None)
        if window is None:
            return None
        window._merge_held(self._clock())
        if not window.settled:
            window.held, window.histograms, window.failures = {}, {}, {}
            window.end_second = window.first_second
        return window

    def clear(self) -> None:
        self._windows.clear()
        self.first_second = None
