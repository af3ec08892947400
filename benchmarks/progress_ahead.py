"""Whether etcd answers a watch progress request ahead of the events it has still to send (etcd issue #15220).

    python -m benchmarks.progress_ahead [--binaries 3.5,3.4] [--watchers 100] [--puts 200]

For each etcd binary (a version of those found here, or a path) one local member on 127.0.0.1: ``--watchers``
watchers of one key on one stream, ``--puts`` puts of that key acknowledged before the stream is read, then a progress
request. A row per binary: the events received, the revision of the progress notification, and how many events came
after it at or below its revision. etcd promises none; before 3.4.25 and 3.5.8 it answers the request at once from
another queue than the events', so most of them do. This is why ``EtcdWatchUser`` does not judge a missed event by a
progress notification (see the audit's docs).
"""

from __future__ import annotations

import argparse
import asyncio

import grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from etcd_users.local import LocalCluster
from etcd_users.local.binary import choose_etcd_binary

KEY = b"/locust-etcd/progress-ahead"
READ_IDLE_S = 2.0  # the stream is read until it stays quiet this long


async def probe(endpoint: str, watchers: int, puts: int) -> tuple[int, int, int]:
    """(events received, progress notification's revision, events after it at or below that revision)."""
    async with grpc.aio.insecure_channel(endpoint.removeprefix("http://")) as channel:
        kv, call = rpc_pb2_grpc.KVStub(channel), rpc_pb2_grpc.WatchStub(channel).Watch()
        for _ in range(watchers):
            await call.write(rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=KEY)))
        created = 0
        while created < watchers:
            created += (await call.read()).created
        await asyncio.gather(*(kv.Put(rpc_pb2.PutRequest(key=KEY, value=b"v")) for _ in range(puts)))
        await call.write(rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest()))
        events = progress = ahead = 0
        while True:
            try:
                response = await asyncio.wait_for(call.read(), READ_IDLE_S)
            except asyncio.TimeoutError:
                break
            if not response.events:
                progress = max(progress, response.header.revision)
            events += len(response.events)
            ahead += sum(1 for event in response.events if event.kv.mod_revision <= progress)
        call.cancel()
        return events, progress, ahead


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.progress_ahead", description=__doc__.split("\n")[0])
    parser.add_argument("--binaries", default="3.5,3.4", help="etcd versions found here, or paths, comma-separated")
    parser.add_argument("--watchers", type=int, default=100, help="watchers of the key on the one stream")
    parser.add_argument("--puts", type=int, default=200, help="puts acknowledged before the stream is read")
    args = parser.parse_args()
    print("etcd     | watchers | puts | events | progress rev | events after it at or below it")
    for choice in args.binaries.split(","):
        binary = choose_etcd_binary(choice, "--binaries")
        cluster = LocalCluster(1, binary=binary.path, name="progress-ahead")
        cluster.start()
        try:
            events, progress, ahead = asyncio.run(probe(cluster.endpoints[0], args.watchers, args.puts))
        finally:
            cluster.stop()
        print(f"{binary.version:<8} | {args.watchers:>8} | {args.puts:>4} | {events:>6} | {progress:>12} | {ahead:,}")


if __name__ == "__main__":
    main()
