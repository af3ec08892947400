"""The watchers of one process: their tally, the revision newest known, and the events of this process's writes.

The loop thread updates ``tally``, ``newest`` and ``arrivals`` as responses come; the gevent thread reads the
counts, records its own puts' acknowledgements and reports the delivery latencies. One per process, kept on the run's
context (``etcd_users.core.run_context``) and made afresh at each run's start.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from etcd_users.run_state.watch_latencies import WatchLatencies
from etcd_users.run_state.watch_tally import WatchTally

# seconds an acknowledgement waits for its events (and an event for its acknowledgement) before it is forgotten
DELIVERY_HORIZON = 30.0


class ProcessWatchers:
    def __init__(self) -> None:
        self.tally = WatchTally()
        self.newest = 0  # the newest revision any watch response of the process carried
        self.streams = 0  # streams opened so far: which of them are slow
        self.live: set = set()  # the PrefixWatchers open, on the loop thread
        self.cancelled: deque[str] = deque()  # etcd's reasons, one per cancelled watcher, for a user to report
        # events matched to this process's puts by revision: made by the first watcher user, None without one
        self.latencies: WatchLatencies | None = None
        self.local_writes = False  # a put of this process was acknowledged while watchers ran: match events
        self.reporter: object | None = None  # the one watcher user that reports the process's latencies and cancels

    def start_matching(self) -> WatchLatencies:
        if self.latencies is None:
            self.latencies = WatchLatencies(DELIVERY_HORIZON)
        return self.latencies

    def is_slow(self, stream: int, fraction: float) -> bool:
        """Stream number ``stream`` of the process is slow: ``fraction`` of the streams, spread evenly."""
        return int((stream + 1) * fraction) > int(stream * fraction)


@dataclass
class WatchTallies:
    """The watchers' slot on the run's context for the other features: the whole run's tally once the run is judged,
    and the tally so far (the process's own, or a master's workers' as last reported: the web UI, the exporter)."""

    final: WatchTally | None = None
    live: Callable[[], WatchTally] = WatchTally
