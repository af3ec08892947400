"""The Python floor: the Locust users' etcd requests from a bare grpc.aio loop on uvloop, with no Locust and no gevent.

USERS coroutines share CONNS channels (each its own TCP connection, as the tool opens them) and await one request after
another: a PutRequest of a fresh random key of the key space, or a RangeRequest of one such key, sent as bytes made by
hand and answered as bytes left unparsed, as the tool's ready workloads do (``--messages``: protobuf messages through
the generated stubs, the floor as it was before the tool learnt that; about 2 µs more per request). Measured like the
Locust probe (``benchmarks/cpu_probe.py``): after the warm-up, getrusage of the whole process and an HDR histogram of
the time around each await, over the window; the result is printed (or written with ``--json``) as JSON.

    python -m benchmarks.bare_aio --endpoint 127.0.0.1:2379 --op put --conns 8 --users 64 --seconds 15
    python -m benchmarks.bare_aio --endpoint 127.0.0.1:2379 --populate   # write the read key space, then exit
"""

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import time

import grpc
import uvloop
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
from hdrh.histogram import HdrHistogram

from benchmarks.window import percentiles_ms, process_usage, write_atomically

OPS = ("put", "range/linearizable", "range/serializable")
# as etcd_users.transport.pool opens its channels (not imported: that module loads Locust)
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.use_local_subchannel_pool", 1),
)
POPULATE_CONCURRENCY = 64  # as the Locust users write the key space
# the tool's defaults (etcd_users.settings); the harness passes them explicitly
DEFAULT_PREFIX = "/locust-etcd/"
DEFAULT_KEY_SIZE = 256
DEFAULT_VAL_SIZE = 1024
DEFAULT_KEY_SPACE_SIZE = 10000
DEFAULT_TIMEOUT = 5.0


class BareError(RuntimeError):
    pass


class KeySpace:
    """The Locust users' keys: the prefix, then a zero-padded counter up to the key size."""

    def __init__(self, prefix: bytes, key_size: int, size: int) -> None:
        self.prefix, self.size, self.width = prefix, size, key_size - len(prefix)
        if self.width < len(str(size - 1)):
            raise BareError(f"--key-size {key_size} leaves no room for the counter after the prefix")

    def key(self, index: int) -> bytes:
        return self.prefix + b"%0*d" % (self.width, index)


class Window:
    recording = False
    stopping = False


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, 3_600_000_000, 3)  # 1 µs to 1 h, 3 digits: as the probe


class RawStub:
    """etcd's Put and Range with bytes in and out, as the tool's ready workloads call them (``transport.wire``)."""

    def __init__(self, channel) -> None:
        self.Put = channel.unary_unary("/etcdserverpb.KV/Put")
        self.Range = channel.unary_unary("/etcdserverpb.KV/Range")


def _bytes_field(number: int, data: bytes) -> bytes:
    length, header = len(data), bytearray([number << 3 | 2])
    while length > 0x7F:
        header.append(length & 0x7F | 0x80)
        length >>= 7
    header.append(length)
    return bytes(header) + data


async def _user(
    op, next_stub, keys: KeySpace, value: bytes, args: argparse.Namespace, window: Window, histograms, counts
) -> None:
    """One loop of requests: back to back, or with ``--rate`` at its share of it on a fixed schedule (each user starts
    at a random phase, as the tool's rate-driven users), its latency also taken from when each request was due."""
    timeout, raw = args.timeout, not args.messages
    prefix, width, size = keys.prefix, keys.width, keys.size
    generator = random.Random()
    randrange = generator.randrange
    histogram, intended = histograms
    record, record_intended = histogram.record_value, intended.record_value
    interval = args.users / args.rate if args.rate > 0 else 0.0
    due = time.perf_counter() + generator.uniform(0.0, interval)
    perf_counter = time.perf_counter
    serializable = op == "range/serializable"
    value_field = _bytes_field(2, value) if value else b""
    read_tail = b"\x38\x01" if serializable else b""  # RangeRequest's serializable, field 7
    while not window.stopping:
        if interval:
            delay = due - perf_counter()
            while delay > 0:  # as the tool's schedule: uvloop's timers may wake up to a millisecond early
                await asyncio.sleep(delay + 0.0005)
                delay = due - perf_counter()
        key = prefix + b"%0*d" % (width, randrange(size))
        stub = next_stub()
        if raw:
            call = stub.Put if op == "put" else stub.Range
            request = _bytes_field(1, key) + (value_field if op == "put" else read_tail)
        elif op == "put":
            call, request = stub.Put, rpc_pb2.PutRequest(key=key, value=value)
        else:
            call, request = stub.Range, rpc_pb2.RangeRequest(key=key, serializable=serializable)
        started = perf_counter()
        try:
            await call(request, timeout=timeout, metadata=())
            failed = 0
        except (grpc.aio.AioRpcError, asyncio.TimeoutError):
            failed = 1
        ended = perf_counter()
        if window.recording:
            record(max(1, int((ended - started) * 1e6)))
            if interval:
                record_intended(max(1, int((ended - due) * 1e6)))
            counts[failed] += 1
        due += interval


async def populate(stub, keys: KeySpace, value: bytes, timeout: float) -> int:
    """Write every key of the key space unless it is all there (as the range users do in on_start)."""
    first, end = keys.key(0), keys.key(keys.size - 1) + b"\0"
    count = await stub.Range(rpc_pb2.RangeRequest(key=first, range_end=end, count_only=True), timeout=timeout)
    if count.count >= keys.size:
        return 0
    limit = asyncio.Semaphore(POPULATE_CONCURRENCY)

    async def put(index: int) -> None:
        async with limit:
            await stub.Put(rpc_pb2.PutRequest(key=keys.key(index), value=value), timeout=timeout)

    await asyncio.gather(*(put(index) for index in range(keys.size)))
    return keys.size


async def measure(args: argparse.Namespace) -> dict:
    keys = KeySpace(args.prefix.encode(), args.key_size, args.key_space_size)
    value = os.urandom(args.val_size)
    channels = [grpc.aio.insecure_channel(args.endpoint, options=CHANNEL_OPTIONS) for _ in range(args.conns)]
    try:
        stubs = [rpc_pb2_grpc.KVStub(channel) for channel in channels]
        if args.populate or args.op != "put":
            written = await populate(stubs[0], keys, value, args.timeout)
        if not args.messages:
            stubs = [RawStub(channel) for channel in channels]
            if args.populate:
                return {"state": "done", "populated": written}
        window, histogram, intended, counts = Window(), new_histogram(), new_histogram(), [0, 0]
        next_stub = itertools.cycle(stubs).__next__  # successive requests rotate over the channels, as the tool's
        users = [
            asyncio.create_task(_user(args.op, next_stub, keys, value, args, window, (histogram, intended), counts))
            for _ in range(args.users)
        ]
        await asyncio.sleep(args.warmup)
        opened = process_usage()
        window.recording = True
        if args.json:  # the harness samples this process's connections while the window is open
            write_atomically(args.json, {"state": "measuring", "pid": os.getpid()})
        await asyncio.sleep(args.seconds)
        window.recording = False
        closed = process_usage()
        window.stopping = True
        await asyncio.wait_for(asyncio.gather(*users), args.timeout + 5.0)
    finally:
        await asyncio.gather(*(channel.close() for channel in channels))
    delta = {key: closed[key] - opened[key] for key in opened}
    return {
        "state": "done",
        "pid": os.getpid(),
        "seconds": delta["time"],
        "requests": counts[0] + counts[1],
        "failures": counts[1],
        "recorded": histogram.get_total_count(),
        "cpu_seconds": delta["cpu"],
        "cpu_user_seconds": delta["cpu_user"],
        "cpu_system_seconds": delta["cpu_system"],
        "voluntary_switches": delta["voluntary_switches"],
        "involuntary_switches": delta["involuntary_switches"],
        "users": args.users,
        "latency_ms": percentiles_ms(histogram),
        "intended_latency_ms": percentiles_ms(intended) if args.rate > 0 else None,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_aio", description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True, help="HOST:PORT of an etcd member (plain text)")
    parser.add_argument("--op", choices=OPS, default="put")
    parser.add_argument("--conns", type=int, default=1, help="gRPC channels, each its own TCP connection")
    parser.add_argument("--users", type=int, default=64, help="concurrent request loops")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before the window opens")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of the measurement window")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX)
    parser.add_argument("--key-size", type=int, default=DEFAULT_KEY_SIZE)
    parser.add_argument("--val-size", type=int, default=DEFAULT_VAL_SIZE)
    parser.add_argument("--key-space-size", type=int, default=DEFAULT_KEY_SPACE_SIZE)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="per-request deadline, seconds")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="requests per second of all the loops together (0: back to back)"
    )
    parser.add_argument("--populate", action="store_true", help="only write the read key space, then exit")
    parser.add_argument(
        "--messages",
        action="store_true",
        help="send protobuf messages and parse the answers (the generated stubs); by default requests and answers are "
        "bytes, as the tool's ready workloads send them",
    )
    parser.add_argument("--json", metavar="FILE", help="write the result here instead of to stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if "gevent" in sys.modules or "locust" in sys.modules:
        raise SystemExit("benchmarks.bare_aio: error: gevent or Locust got imported; the floor must run without them")
    if min(args.conns, args.users, args.key_space_size) < 1 or args.seconds <= 0 or args.warmup < 0 or args.rate < 0:
        raise SystemExit(
            "benchmarks.bare_aio: error: --conns, --users, --key-space-size and --seconds must be > 0, --rate >= 0"
        )
    try:
        result = uvloop.run(measure(args))
    except (BareError, grpc.aio.AioRpcError, asyncio.TimeoutError) as error:
        text = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error) or type(error).__name__
        sys.stderr.write(f"benchmarks.bare_aio: error: {text}\n")
        return 2
    if args.json:
        write_atomically(args.json, result)
    else:
        sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
