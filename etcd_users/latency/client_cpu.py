"""Each Locust process's own CPU, once a second: was it etcd or the load generator that ran out?

Every process (a master, each worker, a single process) samples ``time.process_time()`` (all its threads: the users'
greenlets and the gRPC bridge's loop) in a background greenlet, on the whole wall-clock second: a sample is the CPU
the process used over [T, T+1) in percent of one core (above 100 is possible, the bridge's thread runs beside the
users'), and, on Linux, the time its two busy threads (the users' greenlets' and the transport's loop thread, where
the ready workloads' users run) were ready to run but waited for a CPU (``/proc/self/task/ID/schedstat``):
on a machine whose cores are all busy a generator that wants a whole core gets less, and waits for the rest. One
clock read and one small file read a second, nothing on the request path. A process too busy to wake on time gives
one longer interval, still labelled with the second it started in.

Workers ship their samples with Locust's own report (``report_to_master``), the way the latency store ships its
closed seconds; the master adds them under the worker's id (Locust's ``client_id``). The master (or the single
process) writes them with ``--csv PREFIX`` to ``PREFIX_client_cpu.csv`` (columns in ``etcd_users.files``), its own
rows as ``master`` (``local`` without workers): appended in time order once every worker has had the time to report
a second, all of them at ``quit``. Memory stays bounded on hour-long runs: the master keeps only the rows not yet
written, a worker only the samples not yet sent (at most ``MAX_UNSENT``).
"""

from __future__ import annotations

from locust import runners as locust_runners
from locust.env import Environment

import csv
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

import gevent

from etcd_users.core.role import Role
from etcd_users.files import CLIENT_CPU_COLUMNS, LOCAL_PROCESS, MASTER_PROCESS, SUFFIXES
from etcd_users.transport import bridge

logger = logging.getLogger(__name__)

REPORT_KEY = "etcd_client_cpu"
SAMPLE_SECONDS = 1.0
# A worker that cannot reach its master keeps this many samples (the oldest go first).
MAX_UNSENT = 600
# On a master a second is written once every worker has had the time to report it (reports every 3 s).
LATE_GRACE_SECONDS = 2.0

SCHEDSTAT = "/proc/self/schedstat"  # the main thread's: "run ns, run-queue wait ns, time slices"

_now = time.time
_cpu = time.process_time

Sample = tuple[int, float, float | None]  # (second, CPU and run-queue wait in percent of one core)
Row = tuple[int, str, float, float | None]  # (second, process, CPU %, wait %)


def run_queue_wait(path: str = SCHEDSTAT) -> float | None:
    """Seconds a thread (by default the main thread) has waited for a CPU since it started; None where the system
    does not say."""
    try:
        with open(path, "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def run_queue_waits() -> dict[str, float] | None:
    """Seconds each thread that runs users has waited for a CPU: the main thread (the users' greenlets) and the
    transport's loop thread (every call, and the ready workloads' users themselves); None where the system does not
    say."""
    main = run_queue_wait()
    if main is None:
        return None
    waits = {"main": main}
    loop = bridge.loop_thread_id()
    if loop is not None:
        waited = run_queue_wait(f"/proc/self/task/{loop}/schedstat")
        if waited is not None:
            waits["loop"] = waited
    return waits


def waited_percent(before: dict[str, float] | None, after: dict[str, float] | None, wall: float) -> float | None:
    """The threads' waits for a CPU between two readings, in percent of one core (a thread new since ``before``
    counts from the next interval)."""
    if before is None or after is None:
        return None
    return cpu_percent(sum(after[thread] - before[thread] for thread in after if thread in before), wall)


def cpu_percent(cpu_seconds: float, wall_seconds: float) -> float | None:
    """CPU (or wait) over an interval in percent of one core; None for an interval of no length."""
    if wall_seconds <= 0:
        return None
    return 100.0 * max(0.0, cpu_seconds) / wall_seconds


def busiest(rows: list[Row], seconds: range) -> tuple[float | None, float | None]:
    """The mean CPU and wait (percent of one core) over ``seconds`` of the process that wanted the most, from its
    rows; (None, None) without any."""
    by_process: dict[str, list[Row]] = {}
    for row in rows:
        if row[0] in seconds:
            by_process.setdefault(row[1], []).append(row)
    best: tuple[float, float | None] | None = None
    for process_rows in by_process.values():
        cpu = sum(row[2] for row in process_rows) / len(process_rows)
        waits = [row[3] for row in process_rows if row[3] is not None]
        wait = sum(waits) / len(waits) if waits else None
        if best is None or cpu + (wait or 0.0) > best[0] + (best[1] or 0.0):
            best = (cpu, wait)
    return best if best is not None else (None, None)


def row_fields(row: Row) -> list[str | int]:
    """A row in CLIENT_CPU_COLUMNS order."""
    second, process, percent, wait = row
    return [second, process, f"{percent:.1f}", "" if wait is None else f"{wait:.1f}"]


class CpuSampler:
    """The samples of this process: one per whole second, from ``start()`` until ``stop()``."""

    def __init__(self, on_sample) -> None:
        self._on_sample = on_sample
        self._greenlet: gevent.Greenlet | None = None

    @property
    def running(self) -> bool:
        return self._greenlet is not None and not self._greenlet.dead

    def start(self) -> None:
        if not self.running:
            self._greenlet = gevent.spawn(self._sample_forever)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _sample_forever(self) -> None:
        # the first interval starts on the next whole second
        second = math.floor(_now()) + 1
        gevent.sleep(max(0.0, second - _now()))
        wall, cpu, waited = _now(), _cpu(), run_queue_waits()
        while True:
            gevent.sleep(max(0.0, second + SAMPLE_SECONDS - _now()))
            now, used, waiting = _now(), _cpu(), run_queue_waits()
            percent = cpu_percent(used - cpu, now - wall)
            wait = waited_percent(waited, waiting, now - wall)
            if percent is not None:
                try:
                    self._on_sample((second, percent, wait))
                except Exception:
                    logger.exception("could not record the client CPU")
            # a late wake-up (a busy process) starts the next interval on the second it is in
            second = max(second + 1, math.floor(now))
            wall, cpu, waited = now, used, waiting


class ClientCpuFile:
    """``PREFIX_client_cpu.csv``: a header, then rows appended (after ``close()``, appended to what is there)."""

    def __init__(self, prefix: str) -> None:
        self.path = prefix + SUFFIXES["client_cpu"]
        self._file: TextIO | None = open(self.path, "w", newline="")
        csv.writer(self._file).writerow(CLIENT_CPU_COLUMNS)
        self._file.flush()

    def append(self, rows: list[Row]) -> None:
        if not rows:
            return
        if self._file is None:
            self._file = open(self.path, "a", newline="")
        csv.writer(self._file).writerows(row_fields(row) for row in rows)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ClientCpu:
    """What Locust's events ask of the client CPU on a master, a worker or a single process (wired by the plugin)."""

    def __init__(self, environment: Environment | None = None) -> None:
        self.environment = environment
        self.sampler = CpuSampler(self._on_sample)
        self._unsent: deque[Sample] = deque(maxlen=MAX_UNSENT)  # a worker's samples the master has not had
        self._pending: list[Row] = []  # a master's (or single process's) rows not written yet
        self._file: ClientCpuFile | None = None
        self.listeners: list[Callable[[Row], None]] = []  # told of each row of a master or single process

    # -- samples --

    def _on_sample(self, sample: Sample) -> None:
        if self._is_worker():
            self._unsent.append(sample)
            return
        process = MASTER_PROCESS if Role.of(self.environment.runner).is_master else LOCAL_PROCESS
        self._add((sample[0], process, *sample[1:]))
        self.flush()

    def on_report_to_master(self, data: dict[str, Any]) -> None:
        data[REPORT_KEY] = [list(sample) for sample in self._unsent]
        self._unsent.clear()

    def on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        for second, percent, *wait in data.get(REPORT_KEY) or ():
            waited = None if not wait or wait[0] is None else float(wait[0])  # None: the worker's system does not say
            self._add((int(second), str(client_id), float(percent), waited))

    def _add(self, row: Row) -> None:
        self._pending.append(row)
        for listener in self.listeners:
            listener(row)

    # -- output --

    def flush(self, final: bool = False) -> None:
        """Write the rows every process has had the time to report (all of them when ``final``), in time order."""
        if final:
            ready, self._pending = self._pending, []
        else:
            horizon = _now()
            if Role.of(self.environment.runner).is_master:
                horizon -= locust_runners.WORKER_REPORT_INTERVAL + LATE_GRACE_SECONDS
            ready = [row for row in self._pending if row[0] + SAMPLE_SECONDS <= horizon]
            if not ready:
                return
            self._pending = [row for row in self._pending if row[0] + SAMPLE_SECONDS > horizon]
        ready.sort(key=lambda row: (row[0], row[1] != MASTER_PROCESS and row[1] != LOCAL_PROCESS, row[1]))
        target = self._client_cpu_file()
        if target is not None:
            target.append(ready)

    def _client_cpu_file(self) -> ClientCpuFile | None:
        if self._file is None:
            prefix = getattr(self.environment.parsed_options, "csv_prefix", None)
            if not prefix or self._is_worker():
                return None
            self._file = ClientCpuFile(prefix)
        return self._file

    # -- the run's events --

    def on_test_start(self) -> None:
        if self._file is not None:
            self.flush(final=True)  # the previous run's last seconds, before its file is replaced
            self._file.close()
            self._file = None
        self.sampler.start()

    def on_quit(self) -> None:
        # after the latency recorder's: the workers' last reports are in
        self.sampler.stop()
        if not self._is_worker():
            self.flush(final=True)
        if self._file is not None:
            self._file.close()

    def _is_worker(self) -> bool:
        return self.environment is not None and Role.of(self.environment.runner).is_worker
