"""``--etcd-compact-interval S``: the run compacts etcd's history every S seconds, at the revision of S seconds ago.

Every write adds a revision that etcd keeps until a compaction drops it; a run of 10k puts/s of 1 KB values adds
about 20 MB of history a second, which fills etcd's default 2 GiB quota in under two minutes, after which etcd refuses
every write (``mvcc: database space exceeded``). ``benchmark put --compact-interval`` compacts for that reason; so does
this, like etcd's own periodic auto-compaction: it notes the cluster's revision a few times per interval (a Status on a
connection of its own) and, every S seconds, compacts at the newest revision noted at least S seconds ago. Freed pages
are reused by etcd's bbolt: the db stays near (S to 2S of history) + the live keys.

Only the master (or the single process) compacts, never a worker, in a greenlet of its own: no user waits on it, and
a compaction that fails is a warning (one per kind), never the end of the run. Compaction is cluster-wide, so it is off
by default; the local etcd compacts itself (``etcd_users.local.space.AUTO_COMPACTION_RETENTION``).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
import time
from collections import deque

import gevent
import gevent.event
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import Probe

# the logger keeps the name its lines have always carried (a filter or a search for it still finds them)
logger = logging.getLogger("etcd_users.compaction")

# revisions noted per interval: the revision compacted is at most a quarter interval older than asked
SAMPLES_PER_INTERVAL = 4
MIN_SAMPLE_SECONDS = 0.1
# etcd's answer when a compaction (its own, or another client's) already went past the revision
ALREADY_COMPACTED = "mvcc: required revision has been compacted"


class CompactionSchedule:
    """Which revision to compact and when: pure bookkeeping of (time, revision) pairs.

    ``note(now, revision)`` records the cluster's revision; ``due(now)`` answers the newest revision noted at least
    ``interval`` seconds before ``now`` once ``interval`` seconds have passed since the last compaction (or the start),
    else None; ``compacted(now, revision)`` records a compaction. ``slack`` absorbs the jitter of a timer that wakes a
    little early (half the sampling period).
    """

    def __init__(self, interval: float, started: float, slack: float = 0.0) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be above zero, not {interval!r}")
        self.interval = interval
        self.slack = slack
        self.last_compaction = started
        self.last_revision = 0
        self._noted: deque[tuple[float, int]] = deque()

    def note(self, now: float, revision: int) -> None:
        if revision > 0:
            self._noted.append((now, revision))

    def due(self, now: float) -> int | None:
        if now - self.last_compaction < self.interval - self.slack:
            return None
        newest = None
        # drop what is old enough: the next compaction wants a newer revision anyway
        while self._noted and self._noted[0][0] <= now - self.interval + self.slack:
            newest = self._noted.popleft()[1]
        if newest is None or newest <= self.last_revision:
            return None
        return newest

    def compacted(self, now: float, revision: int) -> None:
        self.last_compaction = now
        self.last_revision = max(self.last_revision, revision)


async def _revision(pool: EndpointPool) -> int:
    """The cluster's revision as one member has applied it (the header of its Status)."""
    connection = pool.next_connection()
    response = await connection.maintenance.Status(
        rpc_pb2.StatusRequest(), timeout=pool.settings.timeout, metadata=connection.metadata
    )
    return response.header.revision


async def _compact(pool: EndpointPool, revision: int) -> None:
    connection = pool.next_connection()
    # physical=False: etcd answers once the compaction is agreed and frees the pages in the background
    await connection.kv.Compact(
        rpc_pb2.CompactionRequest(revision=revision, physical=False),
        timeout=pool.settings.timeout,
        metadata=connection.metadata,
    )


class Compactor:
    """Compacts every ``settings.monitoring.compact_interval`` seconds in a greenlet of its own, on a ``Probe``."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.interval = settings.monitoring.compact_interval
        self.step = max(MIN_SAMPLE_SECONDS, self.interval / SAMPLES_PER_INTERVAL)
        self.probe = Probe(settings)
        self.schedule = CompactionSchedule(self.interval, time.monotonic(), slack=self.step / 2)
        self.compactions = 0
        # (unix time, revision) of each compaction done: the tail's timeline names them (the newest kept)
        self.compacted_at: deque[tuple[float, int]] = deque(maxlen=10_000)
        self._warned: set[str] = set()
        self._greenlet: gevent.Greenlet | None = None
        self._stopping = gevent.event.Event()

    def tick(self) -> None:
        """Note the revision; compact when due. Failures are warned once per kind; nothing is raised."""
        try:
            self.schedule.note(time.monotonic(), self.probe.run(_revision))
            revision = self.schedule.due(time.monotonic())
            if revision is None:
                return
            try:
                self.probe.run(lambda pool: _compact(pool, revision))
            except grpc.aio.AioRpcError as error:
                if ALREADY_COMPACTED not in error_label(error):
                    raise
                logger.debug("etcd compaction: revision %d was already compacted", revision)
            self.schedule.compacted(time.monotonic(), revision)
            self.compactions += 1
            self.compacted_at.append((time.time(), revision))
            logger.debug("etcd compaction: compacted at revision %d", revision)
        except (grpc.aio.AioRpcError, asyncio.TimeoutError, EndpointError) as error:
            self._warn(error_label(error) if not isinstance(error, EndpointError) else str(error))
        except Exception as error:  # whatever it is, compaction never stops a run
            self._warn(f"{type(error).__name__}: {error}")

    def _warn(self, kind: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            logger.warning("etcd compaction failed (%s); trying again every %gs, the run goes on", kind, self.interval)

    def _run(self) -> None:
        started = time.monotonic()
        steps = 0
        while not self._stopping.is_set():
            self.tick()
            # a fixed schedule; ticks missed while one was slow are skipped, not made up
            steps = max(steps + 1, int((time.monotonic() - started) / self.step) + 1)
            self._stopping.wait(max(0.0, started + steps * self.step - time.monotonic()))

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop compacting and close the connections."""
        if self._greenlet is not None:
            # let a compaction in flight finish, so the count says what the members did
            self._stopping.set()
            self._greenlet.join(timeout=5.0)
            self._greenlet.kill(block=True, timeout=1.0)
            self._greenlet = None
            logger.info(
                "etcd compaction: %d compaction%s, the last at revision %d",
                self.compactions,
                "s" * (self.compactions != 1),
                self.schedule.last_revision,
            )
        self.probe.close()


def start_compacting(settings: EtcdSettings) -> Compactor | None:
    """On the master or the single process at test start: a started compactor when ``--etcd-compact-interval`` asks
    for one (the caller stops it), else None."""
    if settings.monitoring.compact_interval <= 0 or not settings.endpoints:
        return None
    compactor = Compactor(settings)
    compactor.start()
    logger.info(
        "compacting etcd's history every %gs at the revision of %gs ago (--etcd-compact-interval)",
        settings.monitoring.compact_interval,
        settings.monitoring.compact_interval,
    )
    return compactor
