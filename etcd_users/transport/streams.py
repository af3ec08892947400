"""etcd's streaming calls (lease keep-alive, watch), held open on the bridge's loop thread.

A user's greenlet asks for one round trip at a time (one keep-alive, or one put and the watch events it causes);
the coroutines here do the round trip on the loop and time it there.
"""

import asyncio
import bisect
import collections
import time

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit.watch_counts import WatchCounts
from etcd_users.transport.pool import Connection

CATCH_UP_POLL_S = 0.05  # how often ``close`` looks whether the watchers have caught up


class KeepAliveStream:
    """One LeaseKeepAlive stream: each round trip renews the lease once."""

    def __init__(self, connection: Connection) -> None:
        self._call = connection.lease.LeaseKeepAlive(metadata=connection.metadata)

    async def keep_alive(self, lease_id: int) -> rpc_pb2.LeaseKeepAliveResponse:
        await self._call.write(rpc_pb2.LeaseKeepAliveRequest(ID=lease_id))
        response = await self._call.read()
        if response is grpc.aio.EOF or response is None:
            raise ConnectionError("lease keep-alive stream closed")
        return response

    def cancel(self) -> None:
        self._call.cancel()


class WatchFanOut:
    """``streams`` watch streams with ``watchers`` watchers each, all on one key.

    Events are matched to puts by revision, so another writer of the same key costs nothing but ignored events.

    For the audit each watcher's revisions must rise, never repeat, and each put acknowledged here must reach every
    watcher; ``cancel`` adds the counts to ``counts``. A watcher's events come in revision order, so a put that a
    watcher skipped while it delivered a later one of the key is missed for certain. One it has not got to yet may
    still come: owed, not judged. etcd's progress notifications are not used to tell them apart: before 3.4.25 and
    3.5.8 etcd answers a progress request ahead of the events it has still to send (etcd issue #15220).
    """

    def __init__(
        self, connection: Connection, key: bytes, streams: int, watchers: int, counts: WatchCounts | None = None
    ) -> None:
        self.key = key
        self.expected = streams * watchers
        self._calls = [connection.watch.Watch(metadata=connection.metadata) for _ in range(streams)]
        self._watchers = watchers
        self._arrivals: dict[int, list[float]] = collections.defaultdict(list)
        self._waiting: dict[int, asyncio.Future] = {}
        self._created = 0
        self._all_created = asyncio.get_running_loop().create_future()
        self._counts = counts
        self._in_order = self._disordered = self._repeated = self._broken = 0
        self._cancelled = False
        self._undelivered: dict[int, int] = {}  # revision of an acknowledged put -> watchers still to deliver it
        self._latest: list[dict[int, int]] = [{} for _ in range(streams)]  # per stream: watch id -> latest revision
        loop = asyncio.get_running_loop()
        self._readers = [loop.create_task(self._read(call, index)) for index, call in enumerate(self._calls)]

    async def start(self, timeout: float) -> None:
        """Create every watcher and wait until etcd confirms them all."""
        request = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=self.key))
        for call in self._calls:
            for _ in range(self._watchers):
                await call.write(request)
        await asyncio.wait_for(asyncio.shield(self._all_created), timeout)

    async def _read(self, call, stream: int) -> None:
        try:
            await self._read_events(call, stream)
        finally:
            if not self._cancelled:
                self._broken += 1

    async def _read_events(self, call, stream: int) -> None:
        latest = self._latest[stream]
        undelivered = self._undelivered
        async for response in call:
            now = time.perf_counter()
            if response.canceled:
                self._broken += 1  # etcd ended a watcher (a compaction, a lost leader): what it missed is not judged
            if response.created:
                self._created += 1
                if self._created == self.expected and not self._all_created.done():
                    self._all_created.set_result(None)
            for event in response.events:
                revision = event.kv.mod_revision
                previous = latest.get(response.watch_id, 0)
                if revision > previous:
                    latest[response.watch_id] = revision
                    self._in_order += 1
                    left = undelivered.get(revision)
                    if left is not None:
                        if left > 1:
                            undelivered[revision] = left - 1
                        else:
                            del undelivered[revision]
                elif revision == previous:
                    self._repeated += 1  # one key: its revision again is the same event again
                else:
                    self._disordered += 1
                arrivals = self._arrivals[revision]
                arrivals.append(now)
                waiting = self._waiting.get(revision)
                if waiting is not None and len(arrivals) >= self.expected and not waiting.done():
                    waiting.set_result(None)

    async def put_and_wait(self, connection: Connection, value: bytes, timeout: float):
        """Put the watched key; return (put response, put seconds, the acknowledgement's time.perf_counter(), seconds
        from the put's acknowledgement to each event's arrival). An event that overtakes the acknowledgement counts
        as 0."""
        started = time.perf_counter()
        response = await connection.kv.Put(
            rpc_pb2.PutRequest(key=self.key, value=value), timeout=timeout, metadata=connection.metadata
        )
        acknowledged = time.perf_counter()
        revision = response.header.revision
        if len(self._arrivals[revision]) < self.expected:
            self._undelivered[revision] = self.expected - len(self._arrivals[revision])
            self._waiting[revision] = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._waiting[revision], timeout)
            except asyncio.TimeoutError:
                pass  # the events missing are counted as failures by the caller
            finally:
                del self._waiting[revision]
        arrivals = self._arrivals.pop(revision)
        # revisions of other writers' puts are never waited for: drop what is older than ours
        for stale in [r for r in self._arrivals if r < revision]:
            del self._arrivals[stale]
        return (
            response,
            acknowledged - started,
            acknowledged,
            [max(0.0, arrival - acknowledged) for arrival in arrivals],
        )

    async def close(self, seconds: float) -> None:
        """Let the watchers catch up with the puts acknowledged here, for ``seconds`` at most, then cancel them.

        A watch is only judged on what it was due to receive while it was open. At a large fan-out the client takes
        seconds to read what etcd already sent, so the events of the last puts may still be on their way: the
        watchers are given until each undelivered put is either delivered or passed by a later event.
        """
        deadline = time.monotonic() + seconds
        while self._judge()[1] and time.monotonic() < deadline and not self._broken:
            await asyncio.sleep(CATCH_UP_POLL_S)
        self.cancel()

    def _owed(self) -> dict[int, int]:
        """Undelivered (acknowledged put, watchers) of puts whose round trip is over: a put that the stop cut short
        was still waiting for its events."""
        return {revision: left for revision, left in self._undelivered.items() if revision not in self._waiting}

    def _judge(self) -> tuple[int, int]:
        """(missed, owed) of the undelivered puts: a watcher that lacks a put's event and delivered a later revision
        missed it; one still below the put's revision may yet deliver it."""
        owed = self._owed()
        if not owed:
            return 0, 0
        reached = sorted(revision for latest in self._latest for revision in latest.values())
        missed = 0
        for revision, left in owed.items():
            # watchers below the revision lack it and may still get it (a watcher without any event among them)
            below = self.expected - (len(reached) - bisect.bisect_left(reached, revision))
            missed += max(0, left - below)
        return missed, sum(owed.values()) - missed

    def cancel(self) -> None:
        self._cancelled = True
        for call in self._calls:
            call.cancel()
        for reader in self._readers:
            reader.cancel()
        if self._counts is not None:
            missed, still_owed = self._judge()
            if self._broken:
                missed = 0  # a stream that ended misses what came after: told apart only by its count
            self._counts.add(
                WatchCounts(
                    watchers=self.expected,
                    in_order=self._in_order,
                    disordered=self._disordered,
                    missed=missed,
                    broken=self._broken,
                    owed=still_owed,
                    repeated=self._repeated,
                )
            )
            self._counts = None
