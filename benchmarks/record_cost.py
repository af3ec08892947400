"""What the exact latency store's ``record`` costs per request, in process: the ``request`` listener every request of
a run goes through. No etcd, no Locust runner.

The store records ``--calls`` successful puts at ``--rate`` requests a second of a fake clock (so its seconds close,
as they would at that rate), ``--repeat`` times; it prints the best CPU time of the thread per call (a shared machine's
other work is not counted), the closing of each second included, with
the timeline's parts (a run with ``--etcd-disrupt``) and without, and the share of the loop and the fake clock. Run it
in two trees to compare them::

    .venv/bin/python -m benchmarks.record_cost
    (cd ../base && .venv/bin/python -m benchmarks.record_cost)   # a tree without this file: copy it there
"""

from __future__ import annotations

import argparse
import json
import time

from etcd_users.latency import store as store_module
from etcd_users.latency.store import LatencyStore


def per_call_ns(calls: int, rate: float, fine: bool) -> float:
    store = LatencyStore()
    store.fine = fine
    clock = [1_800_000_000.0]
    step = 1.0 / rate

    def now() -> float:
        clock[0] += step
        return clock[0]

    original = store_module._now
    store_module._now = now
    try:
        record = store.record
        started = time.thread_time()
        for _ in range(calls):
            record("etcd", "put", 1.234)
        store.export_report()  # the last second closed: its cost is part of the recording
        elapsed = time.thread_time() - started
    finally:
        store_module._now = original
    return elapsed * 1e9 / calls


def clock_ns(calls: int) -> float:
    """The loop and the fake clock alone, per call: part of every figure above."""
    clock = [0.0]

    def now() -> float:
        clock[0] += 0.0001
        return clock[0]

    started = time.thread_time()
    for _ in range(calls):
        now()
    return (time.thread_time() - started) * 1e9 / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=10_000.0, help="requests a second of the fake clock")
    parser.add_argument("--repeat", type=int, default=7)
    arguments = parser.parse_args()
    results = {"of which the loop and the fake clock": round(min(clock_ns(arguments.calls) for _ in range(7)), 1)}
    for fine in (False, True):
        runs = [per_call_ns(arguments.calls, arguments.rate, fine) for _ in range(arguments.repeat)]
        results["with the timeline's parts" if fine else "without the timeline's parts"] = round(min(runs), 1)
    print(json.dumps({"ns per record, best of": arguments.repeat, **results}))


if __name__ == "__main__":
    main()
