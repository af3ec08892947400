"""Was it etcd or the load generator? The client side of a run, from ``PREFIX_client_cpu.csv`` (each Locust process's
CPU per second, written by ``etcd_users.latency.client_cpu``) and from the intended-time latency of rate-driven users.

A figure measured while a Locust process had no CPU left measures that process: its users wait for the CPU, not for
etcd, so QPS stops growing and the latency grows with the queue of users at the generator. Two rules say so:

- client-bound: the busiest client process wanted at least ``CLIENT_BOUND_PCT`` % of one core on average over the
  window (a level's seconds, or the run's measured window): the CPU it used (``CpuPct``) plus the time its users'
  thread was ready to run but waited for a CPU (``WaitPct``, the Linux run queue: on a machine whose cores are all
  busy a generator gets less than a core and waits for the rest). Per process the means of its samples inside the
  window; the busiest is the process with the highest sum; ``client_cpu_pct`` is the CPU it used. A process runs its
  users in one thread (gevent) beside the gRPC bridge's, so a saturated process reads about 100 %.
- behind schedule (rate mode, levels only): the intended-time P99 more than ``RUNAWAY_RATIO`` times the service-time
  P99 and at least ``RUNAWAY_MIN_MS`` above it while the service time passed every latency gate: etcd answered in
  time, but the users could not send on their schedule (their CPU, or too few users for the rate at that service
  time).

A failed level that is neither, with the client CPU known, failed on the server's side (``server``). Pure: no Locust.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from etcd_users.analysis.hlog import EDGE_S
from etcd_users.files import CLIENT_BOUND_PCT, LOCAL_PROCESS, MASTER_PROCESS

RUNAWAY_RATIO = 2.0
"""Intended-time P99 above this multiple of the service-time P99: the users fell behind their schedule."""
RUNAWAY_MIN_MS = 10.0
"""And later than the service-time P99 by at least this: a few ms of lateness over sub-ms answers is the event
loop's scheduling jitter, not a schedule the users could not keep."""

CLIENT = "client"
SCHEDULE = "schedule"
SERVER = "server"

# the comparison table's columns
CLIENT_CPU = "client CPU (%)"
BOUND = "bound"

ADVICE = (
    f"advice: a client process ran at >= {CLIENT_BOUND_PCT:g} % of a core, so these figures measure the load "
    "generator, not etcd: add --processes N (one per free core) or workers on other machines (--master / --worker) "
    "and run again."
)
SCHEDULE_ADVICE = (
    "advice: the users fell behind their schedule while etcd answered within the gates: give the same QPS to more "
    "users (a lower --etcd-user-rate), and add --processes N or workers if a client process is busy."
)

DEFINITIONS = (
    f"{CLIENT_CPU} = the busiest Locust process's mean CPU over the run's measured window, in percent of one core "
    "(from _client_cpu.csv; the busiest = the highest CPU plus time waiting for a CPU); bound = client when that sum "
    f"is at least {CLIENT_BOUND_PCT:g} %: the process had no CPU to spare, so QPS and latency describe the load "
    "generator, not etcd."
)
LEVEL_NOTE = (
    "client_cpu_pct = the busiest Locust process's mean CPU over the level's whole seconds, in percent of one core "
    "(from _client_cpu.csv; the busiest = the highest CPU plus time waiting for a CPU). bound: client = that sum >= "
    f"{CLIENT_BOUND_PCT:g} % (the load generator had no CPU to spare: the level measured it, not etcd; its verdict "
    f"says '(client-bound)'); schedule = intended-time P99 above {RUNAWAY_RATIO:g} x service-time P99 and by "
    f"{RUNAWAY_MIN_MS:g} ms or more while the service time passed every latency gate (the users fell behind their "
    "schedule; verdict '(behind schedule)'); server = a failed level with neither (the clients had CPU to "
    "spare, so etcd or the network did not keep up); empty otherwise."
)


def window_seconds(start: float | None, end: float | None) -> range | None:
    """The whole unix seconds [T, T+1) inside [start, end); None for no window (every sample counts)."""
    if start is None or end is None:
        return None
    first = math.ceil(start - EDGE_S)
    return range(first, max(first, math.floor(end + EDGE_S)))


class Busiest(NamedTuple):
    """The client process that wanted the most CPU over a window: its mean CPU and run-queue wait, % of one core."""

    process: str
    cpu_pct: float
    wait_pct: float | None  # None where the file has no WaitPct

    @property
    def demand_pct(self) -> float:
        """The CPU it used plus the CPU it waited for: 100 % is a process that was never idle."""
        return self.cpu_pct + (self.wait_pct or 0.0)


def samples(frame: pd.DataFrame | None, seconds: range | None = None) -> pd.DataFrame:
    """The samples of ``seconds`` (all of them with None)."""
    if frame is None or frame.empty:
        return pd.DataFrame(columns=["Timestamp", "Process", "CpuPct", "WaitPct"])
    rows = frame.dropna(subset=["Timestamp", "CpuPct"])
    if seconds is not None:
        rows = rows[(rows["Timestamp"] >= seconds.start) & (rows["Timestamp"] < seconds.stop)]
    return rows


def busiest(frame: pd.DataFrame | None, seconds: range | None = None) -> Busiest | None:
    """Per process the mean of its samples in ``seconds``; the process with the highest demand; None without one."""
    rows = samples(frame, seconds)
    if rows.empty:
        return None
    wait = rows["WaitPct"] if "WaitPct" in rows.columns else pd.Series(float("nan"), index=rows.index)
    frame = pd.DataFrame({"Process": rows["Process"], "cpu": rows["CpuPct"], "wait": wait})
    means = frame.groupby("Process", sort=False)[["cpu", "wait"]].mean()
    demand = means["cpu"] + means["wait"].fillna(0.0)
    process = demand.idxmax()
    wait_pct = means.at[process, "wait"]
    return Busiest(str(process), float(means.at[process, "cpu"]), None if pd.isna(wait_pct) else float(wait_pct))


def client_bound(found: Busiest | None) -> bool:
    return found is not None and found.demand_pct >= CLIENT_BOUND_PCT


def ran_away(intended_p99_ms: float | None, service_p99_ms: float | None) -> bool:
    """The intended-time P99 above ``RUNAWAY_RATIO`` times the service-time P99, and ``RUNAWAY_MIN_MS`` above it."""
    if intended_p99_ms is None or service_p99_ms is None or service_p99_ms <= 0:
        return False
    return intended_p99_ms > RUNAWAY_RATIO * service_p99_ms and intended_p99_ms - service_p99_ms >= RUNAWAY_MIN_MS


def bound(found: Busiest | None, runaway: bool, service_within_gates: bool, failed: bool) -> str:
    """What limited a window: CLIENT, SCHEDULE, SERVER (a failure with the clients' CPU known) or ""."""
    if client_bound(found):
        return CLIENT
    if runaway and service_within_gates:
        return SCHEDULE
    if failed and found is not None:
        return SERVER
    return ""


def cpu_text(found: Busiest) -> str:
    """``the local process at 97 % of a core`` (``, waiting 20 % for one`` when it waited)."""
    waited = f" (+{found.wait_pct:.0f} % waiting for one)" if found.wait_pct and found.wait_pct >= 1.0 else ""
    return f"{process_label(found.process)} at {found.cpu_pct:.0f} % of a core{waited}"


def why(kind: str, found: Busiest | None) -> str:
    """Why a window is what ``bound`` says, in a few words (for a failed keep-up rule)."""
    if kind == CLIENT and found is not None:
        return f"client-bound: {cpu_text(found)}"
    if kind == SCHEDULE:
        return "the users fell behind their schedule"
    if kind == SERVER and found is not None:
        return f"server: the busiest client, {cpu_text(found)}"
    return ""


def process_label(process: str | None) -> str:
    if process in (MASTER_PROCESS, LOCAL_PROCESS):
        return f"the {process} process"
    return f"worker {process}" if process else "a client process"


def cpu_note(label: str, file_name: str, frame: pd.DataFrame, seconds: range | None) -> str:
    """What a run's client CPU figure is made of: the processes, the busiest, its busiest second."""
    found = busiest(frame, seconds)
    rows = samples(frame, seconds)
    if found is None:
        return f"{label}: {file_name} has no sample in the measured window; client CPU empty."
    mine = rows[rows["Process"] == found.process]
    count = rows["Process"].nunique()
    return (
        f"{label}: client CPU from {file_name}: {count} process{'es' * (count > 1)}; the busiest, "
        f"{cpu_text(found)} on average over {len(mine)} s (its busiest second {float(mine['CpuPct'].max()):.1f} %)."
    )


def run_busiest(measured) -> Busiest | None:
    """The busiest client process of a measured run (``RunMeasurement``) over its measured window; None without
    ``_client_cpu.csv`` or a sample in the window."""
    run = measured.run
    if run.client_cpu is None:
        return None
    window = measured.window
    return busiest(run.client_cpu, window_seconds(window.start, window.end) if window is not None else None)


def bound_note(label: str, found: Busiest) -> str:
    """A client-bound run in one line, with what to do (the suites' notes)."""
    return (
        f"{label}: client-bound ({cpu_text(found)} over its measured window): its figures measure the load "
        "generator, not etcd; add --processes N or workers (--master / --worker)."
    )


def add_client_columns(table: pd.DataFrame, runs: list) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The comparison table with ``client CPU (%)`` and ``bound`` (the same on each row of a run), their notes, and
    the labels of the client-bound runs; unchanged when no run has a ``_client_cpu.csv``. ``runs``: RunMeasurement."""
    if all(measured.run.client_cpu is None for measured in runs):
        return table, [], []
    notes = [DEFINITIONS]
    figures: dict[str, Busiest | None] = {}
    for measured in runs:
        run = measured.run
        file_name = run.path("client_cpu").name
        if run.client_cpu is None:
            notes.append(f"{run.label}: no {file_name} (written by this version with --csv); client CPU empty.")
            figures[run.label] = None
            continue
        window = measured.window
        seconds = window_seconds(window.start, window.end) if window is not None else None
        figures[run.label] = run_busiest(measured)
        notes.append(cpu_note(run.label, file_name, run.client_cpu, seconds))
    table = table.copy()
    values = [figures.get(label) for label in table["run"]]
    table[CLIENT_CPU] = pd.Series([float("nan") if v is None else v.cpu_pct for v in values], index=table.index)
    table[BOUND] = [CLIENT if client_bound(value) else "" for value in values]
    bound_runs = [label for label, value in figures.items() if client_bound(value)]
    return table, notes, bound_runs
