"""The watch fan-out's own judging of etcd's responses: order, missed events, and events still owed when the watchers
close. etcd's responses are real ``WatchResponse`` messages fed to the streams' readers in the order a test chooses
(the end-to-end tests in tests/e2e/test_audit.py and test_workloads.py run it against etcd)."""

import asyncio

from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users.audit.watch_counts import WatchCounts
from etcd_users.transport.streams import WatchFanOut

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


def created(watch_id: int) -> rpc_pb2.WatchResponse:
    return rpc_pb2.WatchResponse(watch_id=watch_id, created=True)


def event(watch_id: int, revision: int) -> rpc_pb2.WatchResponse:
    kv = kv_pb2.KeyValue(key=KEY, mod_revision=revision)
    return rpc_pb2.WatchResponse(watch_id=watch_id, events=[kv_pb2.Event(type=kv_pb2.Event.PUT, kv=kv)])


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
    assert (counts.watchers, counts.in_order, counts.disordered) == (2, 2, 2)


def test_a_put_etcd_confirms_it_sent_but_a_watcher_never_got_is_missed():
    async def scenario() -> tuple[WatchCounts, list]:
        watch, connection, counts = await fan_out(2, 1)
        put = asyncio.create_task(watch.put_and_wait(connection, b"v", 0.05))
        await settle()
        connection.streams[0].responses.put_nowait(event(0, 11))  # the other stream's watcher never gets it
        await put
        for stream in connection.streams:  # etcd: every event up to 11 was sent on both streams
            stream.responses.put_nowait(progress(11))
        await watch.close(5)
        return counts, connection.streams[1].written

    counts, written = asyncio.run(scenario())
    assert (counts.in_order, counts.missed, counts.owed) == (1, 1, 0)
    assert written[-1].HasField("progress_request")


def test_events_etcd_has_not_confirmed_by_the_close_are_owed_not_missed():
    async def scenario() -> WatchCounts:
        watch, connection, counts = await fan_out(2, 1)
        put = asyncio.create_task(watch.put_and_wait(connection, b"v", 0.05))
        await settle()
        connection.streams[0].responses.put_nowait(event(0, 11))
        await put
        connection.streams[0].responses.put_nowait(progress(11))  # the other stream's watchers are not synced yet
        await watch.close(0.3)
        return counts

    counts = asyncio.run(scenario())
    assert (counts.in_order, counts.missed, counts.owed) == (1, 0, 1)


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
