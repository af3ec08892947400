"""A run second by second, per request name: requests, failures and the exact latency histogram of each whole second.

The comparison (`analysis.compare`) resamples these seconds to learn how much a run's figures would move had it
been run again. Sources: requests and failures from the run's timeline (`analysis.timeseries`: the tool's per-second
history, else Locust's); latencies from ``PREFIX_latency.hlog``, one HDR histogram per second and name (successes
only: a failure has no latency). Seconds without requests inside the run count as seconds with none (a stall is part
of the run); the run's first and last seconds are partial (the run starts and ends inside them) and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

from etcd_users.analysis.hlog import in_window, intervals
from etcd_users.analysis.load import AnalysisError, Run
from etcd_users.analysis.timeseries import after_cut, timeline
from etcd_users.files import AGGREGATED, SERVICE, tag_text
from etcd_users.hdr import add


@dataclass
class NameSeconds:
    """One request name's seconds in one run, in time order; ``histograms`` is empty without an hlog."""

    run: str
    seconds: np.ndarray  # unix second T of each interval [T, T+1)
    requests: np.ndarray
    failures: np.ndarray
    histograms: dict[int, HdrHistogram] = field(default_factory=dict)

    def within(self, seconds: range) -> NameSeconds:
        """Only the seconds in ``seconds`` (a level's whole seconds)."""
        keep = (self.seconds >= seconds.start) & (self.seconds < seconds.stop)
        kept = self.seconds[keep]
        wanted = {int(second) for second in kept}
        histograms = {second: found for second, found in self.histograms.items() if second in wanted}
        return NameSeconds(self.run, kept, self.requests[keep], self.failures[keep], histograms)

    @property
    def exact(self) -> bool:
        return bool(self.histograms)


@dataclass
class RunSeconds:
    """Every request name of a run (and ``Aggregated``), second by second."""

    run: Run
    names: dict[str, NameSeconds]
    last_second: int | None  # the run's last whole second, for the end of a shape's last level
    cut_s: float | None = None  # the warm-up cut the seconds start after (None: the whole run)


def run_seconds(run: Run, cut_s: float | None = None, series: str = SERVICE) -> RunSeconds:
    """The run's whole seconds after the warm-up cut ``cut_s`` (unix seconds), partial first and last left out."""
    line = timeline(run, series)
    if line is None:
        raise AnalysisError(f"{run.label}: no history to compare second by second (no {run.path('history').name})")
    totals = line.totals()
    active = totals[totals["requests"] > 0]
    if active.empty:
        raise AnalysisError(f"{run.label}: no second with requests in its history")
    first, last = int(round(active["start"].min())), int(round(active["start"].max()))
    # the partial first and last seconds would read as a drop in QPS; a run of 3 s or less keeps them
    if last - first >= 3:
        first, last = first + 1, last - 1
    everything = np.arange(first, last + 1)
    if cut_s is not None:
        everything = everything[[in_window(second, second + 1, cut_s) for second in everything]]
    if not len(everything):
        raise AnalysisError(f"{run.label}: no whole second left after the warm-up cut")

    names = [name for name in dict.fromkeys(line.frame["name"]) if name != AGGREGATED]
    wanted = [*names, AGGREGATED] if line.per_name else [AGGREGATED]
    histograms = _histograms(run, series, set(everything.tolist()), names) if run.hlog_path else {}
    found = {}
    for name in wanted:
        rows = after_cut(line.rows_for(name), cut_s)
        keyed = rows.assign(second=rows["start"].round().astype(int)).groupby("second")[["requests", "failures"]]
        sums = keyed.sum().reindex(everything, fill_value=0)
        found[name] = NameSeconds(
            run.label,
            everything,
            sums["requests"].to_numpy(dtype=np.int64),
            sums["failures"].to_numpy(dtype=np.int64),
            histograms.get(name, {}),
        )
    return RunSeconds(run, found, last, cut_s)


def _histograms(run: Run, series: str, seconds: set[int], names: list[str]) -> dict[str, dict[int, HdrHistogram]]:
    """Per name and second, the hlog's interval; ``Aggregated`` holds all names' intervals of the second added."""
    by_tag = {tag_text(name): name for name in names}
    found: dict[str, dict[int, HdrHistogram]] = {}
    for start_s, _end_s, key, interval in intervals(run.hlog_path):
        second = int(round(start_s))
        if key.series != series or second not in seconds or key.name not in by_tag:
            continue
        name = by_tag[key.name]
        found.setdefault(name, {})[second] = add(found.get(name, {}).get(second), interval)
        everything = found.setdefault(AGGREGATED, {})
        everything[second] = add(everything.get(second), interval)
    return found
