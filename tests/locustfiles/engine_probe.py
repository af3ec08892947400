"""The ready workloads with probes of the loop engine, for ``tests/e2e/test_engine.py``.

- A plain listener of Locust's ``request`` event counts every request it sees by name and prints the counts at the
  end (``listener counts: {...}``), as an OpenTelemetry export or a locust-plugins listener would see them.
- At the stop (``test_stop``), it waits ``ENGINE_PROBE_AFTER_STOP_S`` seconds (default 1), then prints how many
  requests Locust counted in that second and how many users' coroutines still run on the loop thread
  (``after the stop: N requests, M users on the loop``).
- ``ENGINE_PROBE_DROP_BATCH=N`` drops the Nth batch of results on its way to the listeners: the counts no longer
  add up (the tests' must-fail case).
"""

from locust import events

import json
import os

import gevent

from etcd_users.features.engine.results import LoopResults
from etcd_users.features.engine.user_loop import LoopUser
from etcd_users.locustfile import *  # noqa: F403  (every workload class)
from etcd_users.transport import bridge

counts: dict[str, int] = {}


@events.request.add_listener
def count(name, **_kwargs) -> None:
    counts[name] = counts.get(name, 0) + 1


@events.test_stop.add_listener
def after_the_stop(environment, **_kwargs) -> None:
    before = environment.stats.total.num_requests
    gevent.sleep(float(os.environ.get("ENGINE_PROBE_AFTER_STOP_S", "1")))

    async def users_on_the_loop() -> int:
        return LoopUser.running

    running = bridge.bridge().run(users_on_the_loop)
    more = environment.stats.total.num_requests - before
    print(f"after the stop: {more} requests, {running} users on the loop", flush=True)


@events.quit.add_listener
def print_counts(**_kwargs) -> None:
    print(f"listener counts: {json.dumps(counts, sort_keys=True)}", flush=True)


_drop = int(os.environ.get("ENGINE_PROBE_DROP_BATCH", "0"))
if _drop:
    _apply = LoopResults._apply
    _batches = [0]

    def _dropping(self, items):
        _batches[0] += 1
        if _batches[0] != _drop:
            _apply(self, items)

    LoopResults._apply = _dropping
