"""What reporting a request costs on the gevent thread, in process: the loop engine's batches against one ``request``
event per request (the greenlet path), and what a listener of one's own adds to each. No etcd.

A Locust environment with its runner's statistics and the tool's exact-latency store listens, as in a run. Each case
reports ``--calls`` successful puts, 1,500 a second of their own clock, ``--repeat`` times, and prints the best CPU
time of the thread per request:

- ``event``: ``events.request.fire`` per request, as ``EtcdClient`` fires it;
- ``batch``: ``LoopResults``' application of the same requests in batches of ``--batch`` (Locust's statistics and
  the store each take a batch at once);
- ``+ listener``: each again with a listener of one's own that does nothing (an OpenTelemetry export or a
  locust-plugins listener does more): the batch calls it once per request, with the keywords the event has.

    .venv/bin/python -m benchmarks.batch_cost
"""

import locust  # noqa: F401  (gevent's monkey patching first)
from locust.env import Environment

import argparse
import json
import time

from etcd_users.features.engine.results import LoopResults
from etcd_users.latency.store import LatencyStore


def _environment(listener: bool) -> tuple[Environment, LatencyStore]:
    environment = Environment(user_classes=[])
    store = LatencyStore()
    environment.events.request.add_listener(store.record)
    environment.create_local_runner()
    if listener:
        environment.events.request.add_listener(lambda **_kwargs: None)
    return environment, store


def _results(calls: int, start: float) -> list[tuple]:
    return [("put", 0.0012, start + index / 1500.0, 29, None, None) for index in range(calls)]


def per_request_ns(case: str, listener: bool, calls: int, batch: int) -> float:
    environment, _store = _environment(listener)
    results = _results(calls, time.perf_counter())
    started = time.thread_time()
    if case == "event":
        fire = environment.events.request.fire
        for name, seconds, _ended, length, _label, _intended in results:
            fire(request_type="etcd", name=name, response_time=seconds * 1000.0, response_length=length,
                 exception=None, context={})  # fmt: skip
    else:
        applier = LoopResults.__new__(LoopResults)  # its gevent side alone: no loop thread
        applier.environment = environment
        for first in range(0, calls, batch):
            applier._apply(results[first : first + batch])
    elapsed = time.thread_time() - started
    environment.runner.quit()
    return elapsed * 1e9 / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000, help="requests per measurement (default 100,000)")
    parser.add_argument("--batch", type=int, default=1_500, help="results per batch (default 1,500: 0.1 s at 15k/s)")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per case; the best is shown (default 3)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    figures = {}
    for case in ("event", "batch"):
        for listener in (False, True):
            label = f"{case}{' + listener' if listener else ''}"
            figures[label] = (
                min(per_request_ns(case, listener, args.calls, args.batch) for _ in range(args.repeat)) / 1000.0
            )
    if args.json:
        print(json.dumps({"us_per_request": figures, "calls": args.calls, "batch": args.batch}))
        return 0
    print(f"CPU per request on the gevent thread (best of {args.repeat} × {args.calls:,} puts):")
    for label, micros in figures.items():
        print(f"  {label:<18} {micros:6.2f} µs")
    print(f"  a listener of one's own adds {figures['batch + listener'] - figures['batch']:.2f} µs to a batch's "
          f"request, {figures['event + listener'] - figures['event']:.2f} µs to an event's")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
