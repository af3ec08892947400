"""A process's watch events matched to its own writes' acknowledgements: the watch delivery latencies (pure)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class WatchLatencies:
    """Matches watch events to the acknowledgements of the writes that caused them, by revision.

    The loop thread appends ``(revision, arrival, key, deleted)`` to ``arrivals`` as events come; the gevent thread
    records each write's ``acknowledged(revision, at)`` and ``deliver``s: every event of an acknowledged write is
    reported with ``arrival - acknowledgement`` seconds (0 for an event that overtook its acknowledgement). Events of
    writes this process did not make (another worker's, history replayed) are dropped after ``horizon`` seconds, and
    so are acknowledgements whose events never came. Times are ``time.perf_counter()`` seconds.
    """

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        # (revision, arrival, key, deleted) of each event, appended by the loop thread
        self.arrivals: deque[tuple[int, float, bytes, bool]] = deque()
        self.errors: deque[str] = deque()  # why a watcher ended (etcd's label), appended by the loop thread
        self._acks: dict[int, float] = {}
        self._ack_order: deque[tuple[float, int]] = deque()
        self._early: dict[int, list[float]] = {}
        self._early_order: deque[tuple[float, int]] = deque()

    def acknowledged(self, revision: int, at: float, report: Callable[[float], None]) -> None:
        for arrival in self._early.pop(revision, ()):
            report(max(0.0, arrival - at))
        self._acks[revision] = at
        self._ack_order.append((at, revision))
        if self._ack_order[0][0] < at - self.horizon:  # no events come (no watch yet): keep the memory bounded
            self._forget(at)

    def deliver(
        self,
        report: Callable[[float], None],
        now: float,
        observe: Callable[[bytes, int, bool], None] | None = None,
    ) -> None:
        """Report the events of acknowledged writes; ``observe(key, revision, deleted)`` sees every event."""
        arrivals, acks = self.arrivals, self._acks
        while arrivals:
            revision, arrival, key, deleted = arrivals.popleft()
            if observe is not None:
                observe(key, revision, deleted)
            acknowledged = acks.get(revision)
            if acknowledged is not None:
                report(max(0.0, arrival - acknowledged))
            else:
                self._early.setdefault(revision, []).append(arrival)
                self._early_order.append((arrival, revision))
        self._forget(now)

    def _forget(self, now: float) -> None:
        oldest, acks = now - self.horizon, self._acks
        while self._ack_order and self._ack_order[0][0] < oldest:
            acks.pop(self._ack_order.popleft()[1], None)
        while self._early_order and self._early_order[0][0] < oldest:
            self._early.pop(self._early_order.popleft()[1], None)

    def pending(self) -> int:
        """Acknowledgements and early events held (for the tests: the horizon bounds them)."""
        return len(self._acks) + sum(map(len, self._early.values()))
