"""The floor of a watch fan-out: ``benchmarks.watch_events``'s load from plain asyncio on uvloop over grpc.aio.

    python -m benchmarks.bare_watch --target 127.0.0.1:2379 [--users 20] [--streams 10] [--watchers 100]
                                    [--seconds 10] [--warmup 4] --json FILE

Each of ``--users`` coroutines watches its own key with ``--streams`` × ``--watchers`` watchers and puts it in a loop,
waiting until every watcher has the event, as ``EtcdWatchUser`` does; no Locust, no gevent, no statistics. Writes the
window's puts, events and CPU (getrusage) to ``--json`` in the probe's format.
"""

import argparse
import asyncio
import sys

import grpc
import uvloop
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from benchmarks.window import process_usage, write_atomically


class FanOut:
    def __init__(self, channel: grpc.aio.Channel, key: bytes, streams: int, watchers: int) -> None:
        self.key = key
        self.expected = streams * watchers
        self.events = 0
        self.created = 0
        self.want = 0
        self.arrived = asyncio.Event()
        self.calls = [rpc_pb2_grpc.WatchStub(channel).Watch() for _ in range(streams)]
        self.watchers = watchers
        self.readers = [asyncio.create_task(self._read(call)) for call in self.calls]

    async def start(self) -> None:
        request = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=self.key))
        for call in self.calls:
            for _ in range(self.watchers):
                await call.write(request)

    async def _read(self, call) -> None:
        async for response in call:
            if response.created:
                self.created += 1
            self.events += len(response.events)
            if self.events >= self.want:
                self.arrived.set()

    async def put_and_wait(self, kv: rpc_pb2_grpc.KVStub, value: bytes) -> None:
        self.want = self.events + self.expected
        self.arrived.clear()
        await kv.Put(rpc_pb2.PutRequest(key=self.key, value=value))
        await self.arrived.wait()


async def measure(args: argparse.Namespace) -> dict:
    channel = grpc.aio.insecure_channel(args.target)
    kv = rpc_pb2_grpc.KVStub(channel)
    fan_outs = [FanOut(channel, b"/bare-watch/%06d" % user, args.streams, args.watchers) for user in range(args.users)]
    await asyncio.gather(*(fan_out.start() for fan_out in fan_outs))
    value = b"v" * 1024
    puts = 0
    measuring = False

    async def loop(fan_out: FanOut) -> None:
        nonlocal puts
        while True:
            await fan_out.put_and_wait(kv, value)
            if measuring:
                puts += 1

    tasks = [asyncio.create_task(loop(fan_out)) for fan_out in fan_outs]
    await asyncio.sleep(args.warmup)
    measuring, opened = True, process_usage()
    await asyncio.sleep(args.seconds)
    measuring, closed = False, process_usage()
    for task in tasks:
        task.cancel()
    await channel.close()
    return {
        "state": "done",
        "seconds": closed["time"] - opened["time"],
        "cpu_seconds": closed["cpu"] - opened["cpu"],
        "by_name": {"put": puts},
        "failures": 0,
        "latency_ms": {"p50": float("nan"), "p99": float("nan")},
    }


def main(argv: list[str] | None = None) -> int:
    if "locust" in sys.modules or "gevent" in sys.modules:
        sys.stderr.write("benchmarks.bare_watch: error: Locust or gevent got imported; run it on its own\n")
        return 1
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_watch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of the etcd member")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--json", required=True, metavar="FILE")
    args = parser.parse_args(argv)
    write_atomically(args.json, uvloop.run(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
