"""The revisions etcd acknowledged to one process's writes, newest and recent, for judging its reads. Pure.

``newest`` is the highest revision of an acknowledged write: a linearizable read sent after it must be served at it or
above. The recent ones are kept as (revision, acknowledgement time) pairs, appended only when a write raises
``newest``: the pairs then rise in both revision and time, and the first pair above a revision is also the earliest
acknowledged write above it (any later-acknowledged write above it came after a pair that was already above). Pairs
older than the window are trimmed, so a member behind for longer is told as behind by the window at most.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

WINDOW_SECONDS = 60.0
_COMPACT_AFTER = 4096  # trimmed pairs are dropped from the lists' heads in batches, not one by one


class AcknowledgedWrites:
    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.newest = 0
        self._window = window
        self._revisions: list[int] = []
        self._times: list[float] = []  # time.perf_counter() of each acknowledgement, on the users' thread
        self._start = 0  # the first pair inside the window

    def acknowledged(self, revision: int, at: float) -> None:
        """A write acknowledged at ``revision`` at ``at``; called after its response, on the users' thread."""
        if revision <= self.newest:  # responses of concurrent users come in any order
            return
        self.newest = revision
        revisions, times = self._revisions, self._times
        revisions.append(revision)
        times.append(at)
        if at - times[self._start] > self._window:
            start = bisect_left(times, at - self._window, self._start)
            if start >= _COMPACT_AFTER:
                del revisions[:start], times[:start]
                start = 0
            self._start = start

    def first_above(self, revision: int) -> tuple[int, float] | None:
        """The earliest acknowledged write (of the window) above ``revision``: (its revision, when), or None."""
        index = bisect_right(self._revisions, revision, self._start)
        if index == len(self._revisions):
            return None
        return self._revisions[index], self._times[index]
