"""etcd's streaming calls (lease keep-alive, watch), held open on the bridge's loop thread.

A user's greenlet asks for one round trip at a time (one keep-alive, or one put and the watch events it causes);
the coroutines here do the round trip on the loop and time it there.
"""

import asyncio
import collections
import time

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.audit.watch_counts import WatchCounts
from etcd_users.transport.pool import Connection

PROGRESS_ASK_SECONDS = 0.5  # how often ``close`` asks etcd where each watch stream stands


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

    For the audit each watcher's revisions must rise, and each put acknowledged here must reach every watcher before
    the streams are cancelled; ``cancel`` adds the counts to ``counts``.
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
        self._in_order = self._disordered = self._broken = 0
        self._cancelled = False
        self._undelivered: dict[int, int] = {}  # revision of an acknowledged put -> watchers still to deliver it
        # per stream, the revision of etcd's latest progress notification: every event up to it was sent before it
        self._progress = [0] * streams
        self._caught_up: asyncio.Future | None = None  # set while ``close`` waits for the watchers to catch up
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
        latest: dict[int, int] = {}  # watch id -> revision of its latest event
        undelivered = self._undelivered
        async for response in call:
            now = time.perf_counter()
            if response.canceled:
                self._broken += 1  # etcd ended a watcher (a compaction, a lost leader): what it missed is not judged
            elif not response.events and not response.created and not response.compact_revision:
                self._progress[stream] = max(self._progress[stream], response.header.revision)  # a progress notify
                self._check_caught_up()
            if response.created:
                self._created += 1
                if self._created == self.expected and not self._all_created.done():
                    self._all_created.set_result(None)
            for event in response.events:
                revision = event.kv.mod_revision
                if revision > latest.get(response.watch_id, 0):
                    latest[response.watch_id] = revision
                    self._in_order += 1
                    left = undelivered.get(revision)
                    if left is not None:
                        if left > 1:
                            undelivered[revision] = left - 1
                        else:
                            del undelivered[revision]
                else:
                    self._disordered += 1
                arrivals = self._arrivals[revision]
                arrivals.append(now)
                waiting = self._waiting.get(revision)
                if waiting is not None and len(arrivals) >= self.expected and not waiting.done():
                    waiting.set_result(None)
            if self._caught_up is not None and response.events:
                self._check_caught_up()

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
        seconds to read what etcd already sent, so the events of the last puts may still be on their way: etcd's
        progress notification, asked for on each stream, tells that every event up to its revision was sent before
        it. What is undelivered at or below every stream's notified revision is missed; what is above is owed.
        """
        deadline = time.monotonic() + seconds
        self._caught_up = asyncio.get_running_loop().create_future()
        request = rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest())
        while not self._is_caught_up() and time.monotonic() < deadline:
            try:
                # etcd answers only once the stream's watchers are synced: ask again until then
                await asyncio.gather(*(call.write(request) for call in self._calls))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                break  # a stream that ended: what it missed is not judged
            try:
                remaining = max(0.0, deadline - time.monotonic())
                await asyncio.wait_for(asyncio.shield(self._caught_up), min(PROGRESS_ASK_SECONDS, remaining))
            except asyncio.TimeoutError:
                pass
        self.cancel()

    def _owed(self) -> dict[int, int]:
        """Undelivered (acknowledged put, watchers) of puts whose round trip is over: a put that the stop cut short
        was still waiting for its events."""
        return {revision: left for revision, left in self._undelivered.items() if revision not in self._waiting}

    def _is_caught_up(self) -> bool:
        owed = self._owed()
        return not owed or min(self._progress) >= max(owed)

    def _check_caught_up(self) -> None:
        if self._caught_up is not None and not self._caught_up.done() and self._is_caught_up():
            self._caught_up.set_result(None)

    def cancel(self) -> None:
        self._cancelled = True
        for call in self._calls:
            call.cancel()
        for reader in self._readers:
            reader.cancel()
        if self._counts is not None:
            owed = self._owed()
            # every stream was sent every event up to this revision; cancelled without ``close``, all of them
            sent = min(self._progress) if self._caught_up is not None else max(owed, default=0)
            missed = sum(left for revision, left in owed.items() if revision <= sent)
            still_owed = sum(owed.values()) - missed
            if self._broken:
                missed = 0  # a stream that ended misses what came after: told apart only by its count
            self._counts.add(
                WatchCounts(self.expected, self._in_order, self._disordered, missed, self._broken, still_owed)
            )
            self._counts = None
