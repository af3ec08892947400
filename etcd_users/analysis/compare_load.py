"""Did the two sides of a comparison run on an equally busy machine? The time each run's Locust process waited for a
CPU (``WaitPct`` of ``PREFIX_client_cpu.csv``: ready to run, but another process had the core) is the machine's other
load as the load generator felt it; a side that waited far more ran on a busier machine, and its figures may differ
for that rather than for the change.
"""

from __future__ import annotations

import statistics

from etcd_users.analysis.client import busiest
from etcd_users.analysis.load import Run

# percentage points of run-queue wait between the sides' means from which the line is printed
LOAD_GAP_PCT = 10.0


def mean_wait(runs: list[Run]) -> float | None:
    """The mean over the runs of their busiest Locust process's wait for a CPU, % of the time; None without one."""
    found = [found.wait_pct for run in runs if (found := busiest(run.client_cpu)) and found.wait_pct is not None]
    return statistics.fmean(found) if found else None


def load_lines(baseline: list[Run], candidate: list[Run]) -> list[str]:
    """One line when the sides' Locust processes waited for a CPU for shares of the time LOAD_GAP_PCT apart."""
    waits = mean_wait(baseline), mean_wait(candidate)
    if None in waits or abs(waits[0] - waits[1]) < LOAD_GAP_PCT:
        return []
    busier = "candidate" if waits[1] > waits[0] else "baseline"
    return [
        f"machine load: the baseline's Locust waited for a CPU {waits[0]:.0f} % of the time, the candidate's "
        f"{waits[1]:.0f} % (PREFIX_client_cpu.csv): the {busier} ran on a busier machine, and its figures may differ "
        "for that; interleave the runs (A B A B …) so that the machine's load falls on both alike."
    ]
