"""Measures the Locust process from inside: loaded beside the locustfile (``-f locustfile.py,benchmarks/cpu_probe.py``).

Inert unless ``ETCD_BENCH_PROBE_OUT`` names a file. A measurement window opens ``ETCD_BENCH_PROBE_WARMUP`` seconds after
the anchor (``test_start``, or ``spawning_complete`` with ``ETCD_BENCH_PROBE_ANCHOR=spawned``) and closes
``ETCD_BENCH_PROBE_SECONDS`` later or when the run starts stopping, whichever comes first. Over the window it takes the
process's CPU time (getrusage covers every thread: gevent's, the gRPC loop's, gRPC's poller), Locust's request counts,
and an HDR histogram of the response times. The result is written to the file as JSON (``state``: ``measuring`` while
the window is open, then ``done`` or ``failed``). With ``ETCD_BENCH_PROBE_TICK`` set, totals are also appended as JSON
lines to ``<file>.ticks`` every that many seconds while the window is open.

The request listener (one histogram record, about 2 µs) is attached only during the window and is part of the CPU it
measures; ``benchmarks.bare_aio`` records the same histogram, so both sides pay it.

Defines no User and no LoadTestShape: Locust picks nothing up from this module.
"""

from locust import events

import json
import os
import time

import gevent
from hdrh.histogram import HdrHistogram

from benchmarks.window import percentiles_ms, process_usage, write_atomically

_OUT = os.environ.get("ETCD_BENCH_PROBE_OUT", "")
# 1 µs to 1 h at 3 significant digits: exact enough for sub-millisecond etcd latencies
_LOWEST_US, _HIGHEST_US, _DIGITS = 1, 3_600_000_000, 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)


class _Probe:
    def __init__(self, environment, out: str) -> None:
        self.environment = environment
        self.out = out
        self.warmup = float(os.environ.get("ETCD_BENCH_PROBE_WARMUP", "0"))
        self.seconds = float(os.environ.get("ETCD_BENCH_PROBE_SECONDS", "10"))
        self.tick = float(os.environ.get("ETCD_BENCH_PROBE_TICK", "0"))
        self.histogram = new_histogram()
        self.intended = new_histogram()  # rate-driven runs: latency from the intended send time
        self.opened: dict | None = None
        self.finished = False
        self.greenlets: list[gevent.Greenlet] = []
        self.started: tuple[float, int | None] | None = None  # (time, VmRSS kB) at test_start, before any user
        self.spawned_after: float | None = None

    def test_start(self, **_kwargs) -> None:
        self.started = (time.perf_counter(), _rss_kb())

    def spawning_complete(self, **_kwargs) -> None:
        if self.started is not None and self.spawned_after is None:
            self.spawned_after = time.perf_counter() - self.started[0]

    def anchor(self, **_kwargs) -> None:
        if self.opened is None and not self.finished and not self.greenlets:
            self.greenlets.append(gevent.spawn(self._window))

    def _window(self) -> None:
        gevent.sleep(self.warmup)
        if self.finished:
            return
        self.opened = self._snapshot()
        self.environment.events.request.add_listener(self._on_request)
        write_atomically(self.out, {"state": "measuring", "pid": os.getpid(), "users": self.opened["users"]})
        if self.tick > 0:
            self.greenlets.append(gevent.spawn(self._ticks))
        gevent.sleep(self.seconds)
        self.close()

    def _on_request(self, response_time, context=None, **_kwargs) -> None:
        self.histogram.record_value(max(_LOWEST_US, int(response_time * 1000.0)))
        if context:
            intended = context.get("intended_response_time")
            if intended is not None:
                self.intended.record_value(max(_LOWEST_US, int(intended * 1000.0)))

    def _ticks(self) -> None:
        with open(f"{self.out}.ticks", "a") as ticks:
            while not self.finished:
                gevent.sleep(self.tick)
                now = self._snapshot()
                line = {key: now[key] - self.opened[key] for key in ("time", "cpu", "requests", "failures")}
                line["users"] = now["users"]
                ticks.write(json.dumps(line) + "\n")
                ticks.flush()

    def _snapshot(self) -> dict:
        total = self.environment.runner.stats.total
        return {
            **process_usage(),
            "requests": total.num_requests,
            "failures": total.num_failures,
            "users": self.environment.runner.user_count,
            # each request name's count: a watch run's events are its watch rows, its puts the put rows
            "by_name": {name: entry.num_requests for (name, _), entry in self.environment.runner.stats.entries.items()},
        }

    def close(self, **_kwargs) -> None:
        """End the window: on its timer, or at test_stopping (before Locust stops the users)."""
        if self.finished:
            return
        self.finished = True
        if self.opened is None:
            write_atomically(
                self.out,
                {"state": "failed", "error": f"the run stopped before the {self.warmup:g}s warm-up was over"},
            )
            return
        closed = self._snapshot()
        self.environment.events.request.remove_listener(self._on_request)
        opened = self.opened
        delta = {key: closed[key] - opened[key] for key in opened if key not in ("users", "by_name")}
        by_name = {name: count - opened["by_name"].get(name, 0) for name, count in closed["by_name"].items()}
        result = {
            "state": "done",
            "pid": os.getpid(),
            "seconds": delta["time"],
            "requests": delta["requests"],
            "failures": delta["failures"],
            "by_name": by_name,
            "recorded": self.histogram.get_total_count(),
            "cpu_seconds": delta["cpu"],
            "cpu_user_seconds": delta["cpu_user"],
            "cpu_system_seconds": delta["cpu_system"],
            "voluntary_switches": delta["voluntary_switches"],
            "involuntary_switches": delta["involuntary_switches"],
            "users": closed["users"],
            "spawn_seconds": self.spawned_after,
            "rss_kb_at_test_start": self.started[1] if self.started else None,
            "latency_ms": percentiles_ms(self.histogram),
            "intended_latency_ms": percentiles_ms(self.intended) if self.intended.get_total_count() else None,
        }
        write_atomically(self.out, result)


def _rss_kb() -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


@events.init.add_listener
def _on_init(environment, **_kwargs) -> None:
    if not _OUT or environment.runner is None:
        return
    probe = _Probe(environment, _OUT)
    environment.events.test_start.add_listener(probe.test_start)
    environment.events.spawning_complete.add_listener(probe.spawning_complete)
    anchor = environment.events.spawning_complete
    if os.environ.get("ETCD_BENCH_PROBE_ANCHOR", "start") != "spawned":
        anchor = environment.events.test_start
    anchor.add_listener(probe.anchor)
    environment.events.test_stopping.add_listener(probe.close)
