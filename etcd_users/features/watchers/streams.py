"""Prefix watchers on the bridge's loop thread: ``streams`` Watch streams of ``watchers`` watchers on one range.

Each response costs a few attribute reads and dictionary updates: the events are counted, the lag of the last one
kept, each watcher's revisions checked never to go back, nor to repeat or split a revision at a response's start, nor
to come after a progress notification that had passed them (the audit's watch guarantees), and only when this
process also writes are the events' arrival times kept to be matched to its puts. A slow stream sleeps ``delay``
seconds per event before it reads on, so etcd's buffers for it fill and its watchers fall behind, as a slow client's
do. A stream that breaks is opened again on another member, each watcher from the revision after its latest event,
as ``transport.streams.WatchFanOut``'s are.
"""

import asyncio
import time
from collections.abc import Callable

from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users.run_state.watch_tally import bucket, cancel_label
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.transport.pool import Connection
from etcd_users.transport.streams import ResumingStreams
from etcd_users.transport.watch_counts import WatchCounts

_DELETED = (0, 0)  # a prevKV key's entry after a delete: no previous version


class PrefixWatchers(ResumingStreams):
    def __init__(
        self,
        connection: Connection,
        request: rpc_pb2.WatchCreateRequest,
        streams: int,
        watchers: int,
        delays: list[float],
        process: ProcessWatchers,
        counts: WatchCounts | None = None,
        reopen: Callable[[Connection], Connection] | None = None,
    ) -> None:
        super().__init__(connection, streams, reopen)
        self.expected = streams * watchers
        self._request = request
        self._delays = delays
        self._watchers = watchers
        self._process = process
        self._counts = counts
        self._created = 0
        self._all_created = asyncio.get_running_loop().create_future()
        self._judged = WatchCounts()  # ordered, unique, atomic, as each response is judged
        self._ahead = self._broken = 0
        # per stream, per watcher (in the order it was created): its latest event's revision and key, its largest lag
        self._latest = [[0] * watchers for _ in range(streams)]
        self._last_key = [[b""] * watchers for _ in range(streams)]
        self._worst: list[dict[int, int]] = [{} for _ in range(streams)]
        # with prev_kv, the first watcher's keys: the mod revision and the value's hash it delivered last ((0, 0):
        # deleted); one watcher per user is checked, so that the memory is a key space's, not a key space per watcher
        self._seen: dict[bytes, tuple[int, int]] = {}
        self._prev_kv_checked = self._prev_kv_wrong = 0
        self._slots: list[dict[int, int]] = [{} for _ in range(streams)]  # per stream: etcd's watch id -> watcher
        self._opened_at = [0] * streams  # the revision a stream's watchers were created at
        loop = asyncio.get_running_loop()
        self._readers = [loop.create_task(self._read(stream)) for stream in range(streams)]
        process.live.add(self)

    async def start(self, timeout: float) -> None:
        """Create every watcher and wait until etcd confirms them all."""
        for stream, call in enumerate(self._calls):
            await self._create(call, stream)
        await asyncio.wait_for(asyncio.shield(self._all_created), timeout)

    async def _create(self, call, stream: int) -> None:
        """The stream's watchers, in their order: once open, each from the revision after its latest event (or the
        stream's creation), so that a stream opened again goes on where it broke."""
        self._slots[stream] = {}
        request = rpc_pb2.WatchCreateRequest()
        request.CopyFrom(self._request)
        for latest in self._latest[stream]:
            if self._opened_at[stream]:  # a watcher that has had no event yet starts where it was asked to
                request.start_revision = (
                    latest + 1 if latest else self._request.start_revision or self._opened_at[stream] + 1
                )
            await call.write(rpc_pb2.WatchRequest(create_request=request))

    async def _read_events(self, call, stream: int) -> None:
        delay = self._delays[stream]
        process = self._process
        tally = process.tally
        by_response = tally.by_response
        latest, last_key, worst = self._latest[stream], self._last_key[stream], self._worst[stream]
        slots = self._slots[stream]
        judge = self._judged.judge
        notified: dict[int, int] = {}  # watch id (-1: every watcher of the stream) -> its latest progress notification
        async for response in call:
            header_revision = response.header.revision
            if header_revision > process.newest:
                process.newest = header_revision
            events = response.events
            if not events:
                if response.created:
                    slots = self._slots[stream]  # a stream opened again numbers its watchers anew
                    slots[response.watch_id] = len(slots)
                    self._opened_at[stream] = self._opened_at[stream] or header_revision
                    if not self._reopened[stream]:  # a watcher created again is not another watcher
                        self._created += 1
                        tally.watchers += 1
                        if self._created == self.expected and not self._all_created.done():
                            self._all_created.set_result(None)
                if response.canceled:
                    self._broken += 1
                    label = cancel_label(response.cancel_reason, response.compact_revision)
                    tally.cancelled[label] = tally.cancelled.get(label, 0) + 1
                    process.cancelled.append(label)
                    if not self._all_created.done():
                        self._all_created.set_result(None)  # a watcher etcd refused is not waited for
                elif not response.created:
                    tally.progress += 1
                    notified[response.watch_id] = header_revision
                continue
            slot = slots.get(response.watch_id)
            if slot is None:
                continue  # a watcher of a stream's earlier life
            count = len(events)
            now = time.time()
            if tally.first is None:
                tally.first = now
            tally.last = now
            tally.events += count
            if notified:  # etcd had said every event up to its notification was sent
                bound = max(notified.get(response.watch_id, 0), notified.get(-1, 0))
                if events[0].kv.mod_revision <= bound:
                    self._ahead += sum(1 for event in events if event.kv.mod_revision <= bound)
            previous = judge(events, latest[slot], last_key[slot])
            latest[slot] = previous
            last_key[slot] = events[-1].kv.key
            if slot == 0 and stream == 0 and self._request.prev_kv:
                self._check_prev_kv(events)
            lag = bucket(process.newest - previous)
            by_response[lag] = by_response.get(lag, 0) + 1
            if lag > worst.get(slot, -1):
                worst[slot] = lag
            if process.local_writes:
                arrival = time.perf_counter()
                append = process.latencies.arrivals.append
                for event in events:
                    append((event.kv.mod_revision, arrival, b"", False))
            if delay:
                await asyncio.sleep(delay * count)

    def _check_prev_kv(self, events) -> None:
        """The first watcher's prevKV of each event: the version of the key it delivered last, its value too, or none
        after a delete. A prevKV missing after a put is not judged: etcd leaves it out when that revision is
        compacted."""
        seen = self._seen
        for event in events:
            kv = event.kv
            last = seen.get(kv.key)
            if last is not None and event.HasField("prev_kv"):
                self._prev_kv_checked += 1
                previous = event.prev_kv
                # (0, 0): the key was deleted, so there is no previous version
                if previous.mod_revision != last[0] or hash(previous.value) != last[1]:
                    self._prev_kv_wrong += 1
            elif last == _DELETED:
                self._prev_kv_checked += 1
            seen[kv.key] = _DELETED if event.type == kv_pb2.Event.DELETE else (kv.mod_revision, hash(kv.value))

    def cancel(self) -> None:
        """Close the streams; add each watcher's largest lag to the tally and the order to the audit's counts."""
        if self._cancelled:
            return
        self._cancelled = True
        for call in self._calls:
            call.cancel()
        for reader in self._readers:
            reader.cancel()
        by_watcher = self._process.tally.by_watcher
        for worst in self._worst:
            for lag in worst.values():
                by_watcher[lag] = by_watcher.get(lag, 0) + 1
        self._process.live.discard(self)
        if self._counts is not None:
            # which puts a prefix watcher should have seen is not known here: what it was delivered is judged
            self._counts.add(
                WatchCounts(
                    watchers=self.expected,
                    in_order=self._judged.in_order,
                    disordered=self._judged.disordered,
                    broken=self._broken,
                    repeated=self._judged.repeated,
                    split=self._judged.split,
                    ahead=self._ahead,
                    resumed=sum(self._reopened),
                    prev_kv_checked=self._prev_kv_checked,
                    prev_kv_wrong=self._prev_kv_wrong,
                )
            )
            self._counts = None
