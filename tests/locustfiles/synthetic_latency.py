"""A user that reports known latencies: the ground truth of the exact-latency recorder's end-to-end tests.

Each task fires Locust's ``request`` event with a response time drawn from a seeded distribution (0.2-20 ms,
1 % failures, ``put`` also with an intended-time latency) and appends the same request to a per-process log,
``$SYNTHETIC_LATENCY_LOG_DIR/<pid>.log``, one line each: ``NAME ok|fail SERVICE_MS INTENDED_MS|-``.

With ``SYNTHETIC_LATENCY_FIRE_SECONDS`` the users go quiet that long after the process's first request, so that
Locust's periodic ``_stats.csv`` has caught up by the end of the run. With ``SYNTHETIC_LATENCY_SLOW_STOP_SECONDS``
workers take that long to stop, so that their last report misses the master's 0.5 s wait for it.
"""

from locust import User, constant, events, task
from locust.runners import WorkerRunner

import itertools
import math
import os
import random
import time
from pathlib import Path

from etcd_users.core import plugin
from etcd_users.latency.store import INTENDED_CONTEXT_KEY

# the exact latencies alone: these users are not etcd's (no --etcd-* options, no cluster, no gates)
plugin.install(events, etcd=False)

REQUEST_TYPE = "synthetic"
FAILURE = "synthetic error"
LOG_DIR_VARIABLE = "SYNTHETIC_LATENCY_LOG_DIR"
SEED = os.environ.get("SYNTHETIC_LATENCY_SEED", "1")
FIRE_SECONDS = float(os.environ.get("SYNTHETIC_LATENCY_FIRE_SECONDS", "0"))  # 0: until the run ends
SLOW_STOP_SECONDS = float(os.environ.get("SYNTHETIC_LATENCY_SLOW_STOP_SECONDS", "0"))

_user_numbers = itertools.count()
_log_fds: dict[int, int] = {}
_first_request_at: dict[int, float] = {}


def _log(line: str) -> None:
    # One unbuffered append per request, opened after Locust forked (--processes): a killed user loses nothing.
    pid = os.getpid()
    fd = _log_fds.get(pid)
    if fd is None:
        path = Path(os.environ[LOG_DIR_VARIABLE]) / f"{pid}.log"
        fd = _log_fds[pid] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, line.encode())


@events.test_stop.add_listener
def _stop_slowly(environment, **_kwargs) -> None:
    # A worker sends its last report right after test_stop: this delays it, as a loaded machine does.
    if SLOW_STOP_SECONDS and isinstance(environment.runner, WorkerRunner):
        time.sleep(SLOW_STOP_SECONDS)


class SyntheticLatencyUser(User):
    wait_time = constant(float(os.environ.get("SYNTHETIC_LATENCY_WAIT", "0.005")))

    def on_start(self) -> None:
        self.rng = random.Random(f"{SEED}-{os.getpid()}-{next(_user_numbers)}")

    @task
    def request(self) -> None:
        started = _first_request_at.setdefault(os.getpid(), time.monotonic())
        if FIRE_SECONDS and time.monotonic() - started > FIRE_SECONDS:
            return
        rng = self.rng
        name = "put" if rng.random() < 0.5 else "get"
        service_ms = min(20.0, max(0.2, rng.lognormvariate(math.log(1.5), 0.9)))
        intended_ms = service_ms + rng.expovariate(0.5) if name == "put" else None
        failed = rng.random() < 0.01
        status = "fail" if failed else "ok"
        intended = "-" if intended_ms is None else repr(intended_ms)
        _log(f"{name} {status} {service_ms!r} {intended}\n")
        self.environment.events.request.fire(
            request_type=REQUEST_TYPE,
            name=name,
            response_time=service_ms,
            response_length=0,
            exception=FAILURE if failed else None,
            context={} if intended_ms is None else {INTENDED_CONTEXT_KEY: intended_ms},
        )
