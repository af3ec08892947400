"""The watch readers' own judging of etcd's responses, per guarantee: order and repeats; for prefix watchers, a
revision split over two responses and progress notifications ahead of the events; for the fan-out, missed events and
events still owed when the watchers close. etcd's responses are real ``WatchResponse`` messages fed to the streams'
readers in the order a test chooses (the end-to-end tests in tests/e2e/test_audit.py and test_workloads.py run them
against etcd)."""

import asyncio

from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users.features.watchers.streams import PrefixWatchers
from etcd_users.run_state.watchers import ProcessWatchers
from etcd_users.transport.streams import WatchFanOut
from etcd_users.transport.watch_counts import WatchCounts

KEY = b"/locust-etcd/0001"


class Stream:
    """One watch stream: the responses a test sends, the requests the fan-out wrote."""

    def __init__(self) -> None:
        self.responses: asyncio.Queue = asyncio.Queue()
        self.written: list[rpc_pb2.WatchRequest] = []

    async def write(self, request) -> None:
        self.written.append(request)

    def cancel(self) -> None:
        self.responses.put_nowait(None)

    def __aiter__(self):
        return self

    async def __anext__(self):
        response = await self.responses.get()
        if response is None:
            raise StopAsyncIteration
        return response


class Connection:
    def __init__(self, streams: int) -> None:
        self.metadata = ()
        self.streams = [Stream() for _ in range(streams)]
        made = iter(self.streams)
        self.watch = type("Watch", (), {"Watch": staticmethod(lambda metadata: next(made))})
        self.revision = 10

        async def put(request, timeout, metadata):
            self.revision += 1
            return rpc_pb2.PutResponse(header=rpc_pb2.ResponseHeader(revision=self.revision))

        self.kv = type("KV", (), {"Put": staticmethod(put)})


def created(watch_id: int, revision: int = 10) -> rpc_pb2.WatchResponse:
    return rpc_pb2.WatchResponse(watch_id=watch_id, created=True, header=rpc_pb2.ResponseHeader(revision=revision))


def event(watch_id: int, revision: int, *keys: bytes) -> rpc_pb2.WatchResponse:
    """One response: an event of each key (KEY without any) at one revision, as a transaction's."""
    kvs = [kv_pb2.KeyValue(key=key, mod_revision=revision) for key in keys or (KEY,)]
    return rpc_pb2.WatchResponse(watch_id=watch_id, events=[kv_pb2.Event(type=kv_pb2.Event.PUT, kv=kv) for kv in kvs])


def progress(revision: int) -> rpc_pb2.WatchResponse:
    return rpc_pb2.WatchResponse(watch_id=-1, header=rpc_pb2.ResponseHeader(revision=revision))


async def fan_out(streams: int, watchers: int) -> tuple[WatchFanOut, Connection, WatchCounts]:
    connection, counts = Connection(streams), WatchCounts()
    watch = WatchFanOut(connection, KEY, streams, watchers, counts)
    for stream in connection.streams:
        for watch_id in range(watchers):
            stream.responses.put_nowait(created(watch_id))
    await watch.start(timeout=1)
    return watch, connection, counts


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_events_out_of_order_or_twice_are_counted_as_such():
    async def scenario() -> WatchCounts:
        watch, connection, counts = await fan_out(1, 2)
        for response in (event(0, 12), event(0, 11), event(1, 12), event(1, 12)):
            connection.streams[0].responses.put_nowait(response)
        await settle()
        watch.cancel()
        return counts

    counts = asyncio.run(scenario())
    assert (counts.watchers, counts.in_order, counts.disordered, counts.repeated) == (2, 2, 1, 1)
    assert counts.violations == 2


def test_a_put_a_watcher_skipped_for_a_later_one_is_missed():
    async def scenario() -> WatchCounts:
        watch, connection, counts = await fan_out(2, 1)
        put = asyncio.create_task(watch.put_and_wait(connection, b"v", 0.05))
        await settle()
        connection.streams[0].responses.put_nowait(event(0, 11))  # the other stream's watcher skips it
        await put
        await watch.put_and_wait(connection, b"v", 0.05)
        for stream in connection.streams:
            stream.responses.put_nowait(event(0, 12))
        await watch.close(5)
        return counts

    counts = asyncio.run(scenario())
    assert (counts.in_order, counts.missed, counts.owed, counts.violations) == (3, 1, 0, 1)


def test_a_put_a_watcher_has_not_got_to_by_the_close_is_owed_not_missed():
    async def scenario() -> tuple[WatchCounts, float]:
        watch, connection, counts = await fan_out(2, 1)
        put = asyncio.create_task(watch.put_and_wait(connection, b"v", 0.05))
        await settle()
        connection.streams[0].responses.put_nowait(event(0, 11))
        await put
        # etcd 3.5.1 answers a progress request at once, ahead of the events it has still to send (#15220)
        connection.streams[1].responses.put_nowait(progress(11))
        started = asyncio.get_running_loop().time()
        await watch.close(0.3)
        return counts, asyncio.get_running_loop().time() - started

    counts, seconds = asyncio.run(scenario())
    assert (counts.in_order, counts.missed, counts.owed, counts.violations) == (1, 0, 1, 0)
    assert seconds >= 0.3  # waited for the watcher to the bound


def test_events_that_arrive_while_the_watchers_catch_up_are_neither_missed_nor_owed():
    async def scenario() -> tuple[WatchCounts, float]:
        watch, connection, counts = await fan_out(1, 1)
        await watch.put_and_wait(connection, b"v", 0.01)  # its event comes late
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, connection.streams[0].responses.put_nowait, event(0, 11))
        started = loop.time()
        await watch.close(60)
        return counts, loop.time() - started

    counts, seconds = asyncio.run(scenario())
    assert (counts.in_order, counts.missed, counts.owed) == (1, 0, 0)
    assert seconds < 60  # closed once caught up, not at the bound


def test_a_stream_that_breaks_is_opened_again_on_another_member_from_each_watcher_s_next_revision():
    async def scenario() -> tuple[WatchCounts, list[int], list[rpc_pb2.WatchRequest]]:
        first, other, counts = Connection(1), Connection(1), WatchCounts()
        reopened: list[Connection] = []
        watch = WatchFanOut(first, KEY, 1, 2, counts, reopen=lambda broken: reopened.append(broken) or other)
        for watch_id in (0, 1):
            first.streams[0].responses.put_nowait(created(watch_id, revision=10))
        await watch.start(timeout=1)
        for response in (event(0, 11), event(1, 11), event(0, 12), None):  # the member goes: the stream ends
            first.streams[0].responses.put_nowait(response)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(other.streams[0].written) == 2:
                break
        # etcd numbers the watchers of the new stream anew; each resumes where it stopped
        for response in (created(7, 12), created(8, 12), event(8, 12), event(7, 13), event(8, 13)):
            other.streams[0].responses.put_nowait(response)
        await settle()
        watch.cancel()
        starts = [request.create_request.start_revision for request in other.streams[0].written]
        return counts, starts, reopened

    counts, starts, reopened = asyncio.run(scenario())
    assert starts == [13, 12] and len(reopened) == 1
    assert (counts.resumed, counts.in_order, counts.violations, counts.broken) == (1, 6, 0, 0)


async def prefix_watchers(responses: list[rpc_pb2.WatchResponse], prev_kv: bool = False) -> WatchCounts:
    """One stream of one prefix watcher (id 0) that receives ``responses``, then is cancelled."""
    connection, counts = Connection(1), WatchCounts()
    request = rpc_pb2.WatchCreateRequest(key=b"/locust-etcd/", range_end=b"/locust-etcd0", prev_kv=prev_kv)
    watchers = PrefixWatchers(connection, request, 1, 1, [0.0], ProcessWatchers(), counts)
    connection.streams[0].responses.put_nowait(created(0))
    await watchers.start(timeout=1)
    for response in responses:
        connection.streams[0].responses.put_nowait(response)
    await settle()
    watchers.cancel()
    return counts


def test_a_prefix_watcher_delivered_what_etcd_promises_breaks_no_guarantee():
    a, b = b"/locust-etcd/a", b"/locust-etcd/b"
    responses = [event(0, 11, a, b), event(0, 12, a), progress(12), event(0, 13, b)]
    counts = asyncio.run(prefix_watchers(responses))
    assert (counts.watchers, counts.in_order, counts.violations) == (1, 4, 0)


def test_a_prefix_watcher_counts_each_guarantee_broken():
    a, b = b"/locust-etcd/a", b"/locust-etcd/b"
    responses = [
        event(0, 11, a),
        event(0, 11, b),  # the rest of revision 11 in a response of its own: split
        event(0, 11, b),  # its last event again: repeated
        event(0, 10, a),  # below 11: out of order
        progress(14),
        event(0, 14, a),  # etcd had said every event up to 14 was sent: ahead
    ]
    counts = asyncio.run(prefix_watchers(responses))
    assert (counts.split, counts.repeated, counts.disordered, counts.ahead) == (1, 1, 1, 1)
    assert counts.in_order == 3 and counts.violations == 4


def test_a_prefix_watcher_s_broken_stream_resumes_after_its_last_event_or_where_it_was_asked_to():
    async def scenario() -> tuple[WatchCounts, list[int]]:
        first, other, counts = Connection(1), Connection(1), WatchCounts()
        request = rpc_pb2.WatchCreateRequest(key=b"/locust-etcd/", range_end=b"/locust-etcd0")
        watchers = PrefixWatchers(first, request, 1, 2, [0.0], ProcessWatchers(), counts, lambda broken: other)
        for watch_id in (0, 1):
            first.streams[0].responses.put_nowait(created(watch_id, revision=10))
        await watchers.start(timeout=1)
        for response in (event(0, 11, b"/locust-etcd/a", b"/locust-etcd/b"), None):  # the second has had no event
            first.streams[0].responses.put_nowait(response)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(other.streams[0].written) == 2:
                break
        for response in (created(3, 12), created(4, 12), event(4, 11, b"/locust-etcd/a", b"/locust-etcd/b")):
            other.streams[0].responses.put_nowait(response)
        await settle()
        watchers.cancel()
        return counts, [request.create_request.start_revision for request in other.streams[0].written]

    counts, starts = asyncio.run(scenario())
    assert starts == [12, 11]
    assert (counts.watchers, counts.resumed, counts.in_order, counts.violations) == (2, 1, 4, 0)


def test_a_kubernetes_resource_watch_counts_the_guarantees_its_watchers_break():
    from etcd_users.features.kubernetes.client import ResourceWatch
    from etcd_users.run_state.watch_latencies import WatchLatencies

    async def scenario() -> WatchCounts:
        connection, counts = Connection(1), WatchCounts()
        watch = ResourceWatch(connection, WatchLatencies(horizon=10), counts)
        pods, a, b = b"/registry/pods/", b"/registry/pods/default/a", b"/registry/pods/default/b"
        await watch.add(pods, b"/registry/pods0", 11)
        responses = [created(0), event(0, 11, a), event(0, 12, a, b), event(0, 12, b), event(0, 12, a), event(0, 9, a)]
        for response in responses:  # in order, a transaction, its last event again, split, out of order
            connection.streams[0].responses.put_nowait(response)
        await settle()
        watch.cancel()
        await settle()
        return counts

    counts = asyncio.run(scenario())
    assert (counts.watchers, counts.in_order, counts.repeated, counts.split, counts.disordered) == (1, 4, 1, 1, 1)


def test_a_kubernetes_watch_resumes_a_broken_stream_from_each_resource_s_next_revision_and_relists_only_a_compacted():
    from etcd_users.features.kubernetes.client import ResourceWatch
    from etcd_users.run_state.watch_latencies import WatchLatencies

    pods, nodes = b"/registry/pods/", b"/registry/minions/"

    async def scenario() -> tuple[WatchCounts, list[int], list[bytes], set[bytes]]:
        first, other, counts = Connection(1), Connection(1), WatchCounts()
        watch = ResourceWatch(first, WatchLatencies(horizon=10), counts, lambda broken: other)
        watch.watched.update((pods, nodes))  # as the gevent side does before it adds them
        await watch.add(pods, b"/registry/pods0", 11)
        await watch.add(nodes, b"/registry/minions0", 11)
        for response in (created(0), created(1), event(0, 11, pods + b"a"), event(0, 13, pods + b"b"), None):
            first.streams[0].responses.put_nowait(response)  # the member goes: the stream ends
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(other.streams[0].written) == 2:
                break
        # pods resume after their last event, nodes (no event yet) where they were asked to; then etcd compacts
        # the nodes' revision: that resource alone is listed again
        compacted = rpc_pb2.WatchResponse(watch_id=6, canceled=True, compact_revision=12)
        for response in (created(5, 13), created(6, 13), event(5, 14, pods + b"a"), compacted):
            other.streams[0].responses.put_nowait(response)
        await settle()
        relists, watched = list(watch.relists), set(watch.watched)
        watch.cancel()
        return counts, [request.create_request.start_revision for request in other.streams[0].written], relists, watched

    counts, starts, relists, watched = asyncio.run(scenario())
    assert starts == [14, 11]
    assert relists == [nodes] and watched == {pods}
    assert (counts.watchers, counts.resumed, counts.relisted, counts.in_order, counts.violations) == (2, 1, 1, 3, 0)
    assert counts.describe().endswith(
        "(1 streams resumed after they broke) (1 relists after etcd compacted a watcher's revision)"
    )


def value_at(revision: int) -> bytes:
    return b"v%d" % revision


def change(
    revision: int, key: bytes, previous: int | None, delete: bool = False, previous_value: bytes | None = None
) -> rpc_pb2.WatchResponse:
    """A response of watcher 0 with one event of ``key``, its prevKV at ``previous`` (None: without one), whose value
    is the one written at ``previous`` unless ``previous_value`` says otherwise."""
    kind = kv_pb2.Event.DELETE if delete else kv_pb2.Event.PUT
    value = b"" if delete else value_at(revision)
    event = kv_pb2.Event(type=kind, kv=kv_pb2.KeyValue(key=key, mod_revision=revision, value=value))
    if previous is not None:
        before = value_at(previous) if previous_value is None else previous_value
        event.prev_kv.CopyFrom(kv_pb2.KeyValue(key=key, mod_revision=previous, value=before))
    return rpc_pb2.WatchResponse(watch_id=0, events=[event])


def test_a_prefix_watcher_s_prev_kv_is_the_version_and_value_of_the_key_it_delivered_before():
    a, b = b"/locust-etcd/a", b"/locust-etcd/b"
    right = [change(11, a, 5), change(12, a, 11), change(13, a, 12, delete=True), change(14, a, None)]
    right.append(change(15, b, None))
    counts = asyncio.run(prefix_watchers(right, prev_kv=True))
    # the first event of each key is not judged (its version before the watch is not known); 12, 13 and 14 are
    assert (counts.prev_kv_checked, counts.prev_kv_wrong, counts.violations) == (3, 0, 0)
    wrong = [change(11, a, 5), change(12, a, 9), change(13, a, 12, delete=True), change(14, a, 13)]
    counts = asyncio.run(prefix_watchers(wrong, prev_kv=True))
    assert (counts.prev_kv_checked, counts.prev_kv_wrong, counts.violations) == (3, 2, 2)
    compacted = [change(11, a, 5), change(12, a, None)]  # etcd leaves out a prevKV it compacted: not judged
    assert asyncio.run(prefix_watchers(compacted, prev_kv=True)).prev_kv_checked == 0
    # the right version with another value than the one delivered at it is wrong too
    other_value = [change(11, a, 5), change(12, a, 11, previous_value=b"v11-but-not-as-delivered"), change(13, a, 12)]
    counts = asyncio.run(prefix_watchers(other_value, prev_kv=True))
    assert (counts.prev_kv_checked, counts.prev_kv_wrong, counts.violations) == (2, 1, 1)
