"""etcd's streaming calls (lease keep-alive, watch), held open on the bridge's loop thread.

A user's greenlet asks for one round trip at a time (one keep-alive, or one put and the watch events it causes);
the coroutines here do the round trip on the loop and time it there.
"""

import asyncio
import bisect
import collections
import time
from collections.abc import Callable

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.transport.pool import Connection
from etcd_users.transport.watch_counts import WatchCounts

CATCH_UP_POLL_S = 0.05  # how often ``close`` looks whether the watchers have caught up
REOPEN_BACKOFF_S = 0.1  # the first wait before a broken watch stream is opened again; it doubles while it fails
REOPEN_BACKOFF_MAX_S = 1.0


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


class ResumingStreams:
    """Watch streams whose reader opens a stream again on another member (``reopen``) when it breaks, after
    REOPEN_BACKOFF_S (doubled while it fails, up to REOPEN_BACKOFF_MAX_S). A subclass creates a stream's watchers
    (``_create``, again on the new stream, each from where it stopped) and reads a stream's responses
    (``_read_events``); it starts ``_read`` for each stream once its own state is made."""

    def __init__(self, connection: Connection, streams: int, reopen: Callable[[Connection], Connection] | None) -> None:
        self._cancelled = False
        self._reopen = reopen or (lambda broken: broken)
        self._connections = [connection] * streams
        self._calls = [connection.watch.Watch(metadata=connection.metadata) for _ in range(streams)]
        self._reopened = [0] * streams  # times each stream broke and was opened again

    async def _create(self, call, stream: int) -> None:
        raise NotImplementedError

    async def _read_events(self, call, stream: int) -> None:
        raise NotImplementedError

    async def _read(self, stream: int) -> None:
        backoff = REOPEN_BACKOFF_S
        while True:
            try:
                await self._read_events(self._calls[stream], stream)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass  # the stream broke: opened again below
            if self._cancelled:
                return
            await asyncio.sleep(backoff)  # a member that refuses at once is not asked again in a busy loop
            backoff = min(2 * backoff, REOPEN_BACKOFF_MAX_S)
            connection = self._connections[stream] = self._reopen(self._connections[stream])
            call = self._calls[stream] = connection.watch.Watch(metadata=connection.metadata)
            try:
                await self._create(call, stream)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                continue  # read, and fail, once more: then the next member
            self._reopened[stream] += 1
            backoff = REOPEN_BACKOFF_S


class WatchFanOut(ResumingStreams):
    """``streams`` watch streams with ``watchers`` watchers each, all on one key.

    Events are matched to puts by revision, so another writer of the same key costs nothing but ignored events.

    For the audit each watcher's revisions must rise, never repeat, and each put acknowledged here must reach every
    watcher; ``cancel`` adds the counts to ``counts``. A watcher's events come in revision order, so a put that a
    watcher skipped while it delivered a later one of the key is missed for certain. One it has not got to yet may
    still come: owed, not judged. etcd's progress notifications are not used to tell them apart: before 3.4.25 and
    3.5.8 etcd answers a progress request ahead of the events it has still to send (etcd issue #15220).

    A stream that breaks (its member killed, cut off, or gone) is opened again on another member (``reopen``), each
    of its watchers from the revision after the last one it delivered, as etcd's own client resumes a watch: a watch
    must then miss nothing and repeat nothing across the break.
    """

    def __init__(
        self,
        connection: Connection,
        key: bytes,
        streams: int,
        watchers: int,
        counts: WatchCounts | None = None,
        reopen: Callable[[Connection], Connection] | None = None,
    ) -> None:
        super().__init__(connection, streams, reopen)
        self.key = key
        self.expected = streams * watchers
        self._watchers = watchers
        self._arrivals: dict[int, list[float]] = collections.defaultdict(list)
        self._waiting: dict[int, asyncio.Future] = {}
        self._created = 0
        self._all_created = asyncio.get_running_loop().create_future()
        self._counts = counts
        self._in_order = self._disordered = self._repeated = self._broken = 0
        self._undelivered: dict[int, int] = {}  # revision of an acknowledged put -> watchers still to deliver it
        # per stream, per watcher (in the order it was created): the revision of its latest event
        self._latest = [[0] * watchers for _ in range(streams)]
        self._slots: list[dict[int, int]] = [{} for _ in range(streams)]  # per stream: etcd's watch id -> watcher
        self._opened_at = [0] * streams  # the revision a stream's watchers were created at: they watch from after it
        loop = asyncio.get_running_loop()
        self._readers = [loop.create_task(self._read(index)) for index in range(streams)]

    async def start(self, timeout: float) -> None:
        """Create every watcher and wait until etcd confirms them all."""
        for stream, call in enumerate(self._calls):
            await self._create(call, stream)
        await asyncio.wait_for(asyncio.shield(self._all_created), timeout)

    async def _create(self, call, stream: int) -> None:
        """The stream's watchers, in their order: each from the revision after its latest event (or the stream's
        creation), so that a stream opened again goes on where it broke."""
        self._slots[stream] = {}
        for latest in self._latest[stream]:
            start = max(latest, self._opened_at[stream]) + 1 if self._opened_at[stream] else 0
            create = rpc_pb2.WatchCreateRequest(key=self.key, start_revision=start)
            await call.write(rpc_pb2.WatchRequest(create_request=create))

    async def _read_events(self, call, stream: int) -> None:
        latest, slots = self._latest[stream], self._slots[stream]
        undelivered = self._undelivered
        async for response in call:
            now = time.perf_counter()
            if response.canceled:
                self._broken += 1  # etcd ended a watcher (a compaction, a lost leader): what it missed is not judged
            if response.created:
                slots = self._slots[stream]  # a stream opened again numbers its watchers anew
                slots[response.watch_id] = len(slots)
                self._opened_at[stream] = self._opened_at[stream] or response.header.revision
                if not self._reopened[stream]:  # a watcher created again is not another watcher
                    self._created += 1
                    if self._created == self.expected and not self._all_created.done():
                        self._all_created.set_result(None)
            if not response.events:
                continue
            slot = slots.get(response.watch_id)
            if slot is None:
                continue  # a watcher of a stream's earlier life
            for event in response.events:
                revision = event.kv.mod_revision
                previous = latest[slot]
                if revision > previous:
                    latest[slot] = revision
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
        reached = sorted(revision for latest in self._latest for revision in latest)
        missed = 0
        for revision, left in owed.items():
            below = bisect.bisect_left(reached, revision)  # watchers below it lack it and may still get it
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
                    resumed=sum(self._reopened),
                )
            )
            self._counts = None
