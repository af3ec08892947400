"""The ready workloads with probes of the loop engine, for ``tests/e2e/test_engine.py``.

- A plain listener of Locust's ``request`` event counts every request it sees by name and prints the counts at the
  end (``listener counts: {...}``), as an OpenTelemetry export or a locust-plugins listener would see them.
- At the stop (``test_stop``), it waits ``ENGINE_PROBE_AFTER_STOP_S`` seconds (default 1), then prints how many
  requests Locust counted in that second and how many users' coroutines still run on the loop thread
  (``after the stop: N requests, M users on the loop``), and how many calls were on the wire when their users stopped
  (``answered unreported: N``).
- ``ENGINE_PROBE_DROP_BATCH=N`` drops the Nth batch of results on its way to the listeners: the counts no longer
  add up (the tests' must-fail case).
- ``ENGINE_PROBE_RAISE_EVERY=N``: the counting listener raises on every Nth request it gets, after counting it.
- ``ENGINE_PROBE_STOP_USERS_AFTER=N``: the counting listener raises ``StopUser`` for every request after the Nth; the
  fewest users Locust counted while the run went on is printed at the stop (``fewest users: N``).
- ``ENGINE_PROBE_FAILURES_OUT=PATH``: the end of every failed request (its ``start_time`` plus its response time),
  written to PATH as a JSON list at the end.
- ``ENGINE_PROBE_NO_BATCH_LOGGING=1``: the engine is told this Locust lacks what logging a batch at once takes, as a
  Locust that moved its internals would: each result then reaches Locust's statistics on its own.
"""

from locust import events
from locust.exception import StopUser

import json
import os

import gevent

from etcd_users.features.engine import hooks as engine_hooks
from etcd_users.features.engine import results as engine_results
from etcd_users.features.engine.results import LoopResults
from etcd_users.features.engine.user_loop import LoopUser
from etcd_users.locustfile import *  # noqa: F403  (every workload class)
from etcd_users.transport import bridge

counts: dict[str, int] = {}
failures: list[float] = []
_raise_every = int(os.environ.get("ENGINE_PROBE_RAISE_EVERY", "0"))
_stop_after = int(os.environ.get("ENGINE_PROBE_STOP_USERS_AFTER", "0"))
_failures_out = os.environ.get("ENGINE_PROBE_FAILURES_OUT", "")
_seen = [0]
_fewest_users: list[int] = []


@events.request.add_listener
def count(name, exception=None, start_time=None, response_time=None, **_kwargs) -> None:
    counts[name] = counts.get(name, 0) + 1
    _seen[0] += 1
    if exception is not None and _failures_out:
        failures.append(start_time + response_time / 1000.0)
    if _raise_every and _seen[0] % _raise_every == 0:
        raise RuntimeError(f"the probe's listener fails on request {_seen[0]}")
    if _stop_after and _seen[0] > _stop_after:
        raise StopUser()


@events.spawning_complete.add_listener
def watch_the_users(**_kwargs) -> None:
    if not _stop_after or _fewest_users:
        return

    def sample() -> None:
        runner = _runner[0]
        while runner.state == "running":  # not once the run stops: its users are then stopped by Locust
            _fewest_users.append(runner.user_count)
            gevent.sleep(0.1)

    gevent.spawn(sample)


_runner: list = []


@events.init.add_listener
def keep_the_runner(environment, **_kwargs) -> None:
    _runner.append(environment.runner)


@events.test_stop.add_listener
def after_the_stop(environment, **_kwargs) -> None:
    before = environment.stats.total.num_requests
    gevent.sleep(float(os.environ.get("ENGINE_PROBE_AFTER_STOP_S", "1")))

    async def users_on_the_loop() -> int:
        return LoopUser.running

    running = bridge.bridge().run(users_on_the_loop)
    more = environment.stats.total.num_requests - before
    print(f"after the stop: {more} requests, {running} users on the loop", flush=True)
    print(f"answered unreported: {LoopUser.answered_unreported}", flush=True)
    if _fewest_users:
        print(f"fewest users: {min(_fewest_users)}", flush=True)


@events.quit.add_listener
def print_counts(**_kwargs) -> None:
    print(f"listener counts: {json.dumps(counts, sort_keys=True)}", flush=True)
    if _failures_out:
        with open(_failures_out, "w") as out:
            json.dump(failures, out)


_drop = int(os.environ.get("ENGINE_PROBE_DROP_BATCH", "0"))
if _drop:
    _apply = LoopResults._apply
    _batches = [0]

    def _dropping(self, items):
        _batches[0] += 1
        if _batches[0] != _drop:
            _apply(self, items)

    LoopResults._apply = _dropping

if os.environ.get("ENGINE_PROBE_NO_BATCH_LOGGING"):

    def _lacking() -> str:
        return "Locust 9.9 has no StatsEntry.num_reqs_per_sec"

    engine_results.batch_logging_missing = _lacking
    engine_hooks.batch_logging_missing = _lacking
