"""SLA gates (``--etcd-sla``): thresholds on the run's exact latencies, error share and throughput.

    --etcd-sla 'put:p99<15ms,range/serializable:p99.9<10ms,errors<0.1%'

A gate is ``[NAME:]METRIC OP VALUE``, gates are comma-separated (the grammar is ``etcd_users.settings.parse_gate``):

- NAME: a request name (``put``, ``range/serializable``, ...); none, or ``*``, for all requests together;
- METRIC: ``pNN`` (``p50``, ``p95``, ``p99``, ``p99.9``; ``p999`` is read as 99.9), ``mean`` or ``max``, from the
  exact HDR histograms of ``etcd_users.latency`` (successful requests; unit ``us``, ``ms`` or ``s``);
  ``errors``: failed requests from Locust's stats, as a share (``errors<0.1%``) or a count (``errors<=0``);
  ``qps``: requests per second from the run's first request to its last, failures included;
- OP: ``<``, ``<=``, ``>``, ``>=``.

``disrupt:[NAME:]METRIC OP VALUE`` (``gap``, ``p99``, ``p99.9`` or ``errors``) is judged on each window of
``--etcd-disrupt`` instead, a result per window (``etcd_users.judging.disruption_gates``).

The gates are judged on the master (or the single process) when Locust quits, after the workers' last reports
are merged (the gates' hooks, ``etcd_users.features.gates.hooks``, call ``judge`` then ``print_results``); each is
printed with its measured value and PASS or FAIL. When any fails the run's verdict is ``SLA_EXIT_CODE`` (3,
``exit_verdict``; ``etcd_users.core.exit_code`` decides the process's code from every verdict). A gate whose request
name never ran fails: a misspelt name must not pass unnoticed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.core.exit_code import SLA_EXIT_CODE, ExitVerdict
from etcd_users.files import AGGREGATED, SERVICE
from etcd_users.judging.sla_specs import DISRUPT, LATENCY_UNITS, OPERATORS, Gate, request_gates
from etcd_users.members.lost_workers import WORKERS

if TYPE_CHECKING:
    from etcd_users.latency.recorder import LatencyRecorder

logger = logging.getLogger("etcd_users.gates.sla")  # the name users' log filters know
# where Locust prints its summary (plain lines on stderr, and --logfile, and the web UI's log tab)
_console = logging.getLogger("locust.stats_logger")

DECIMALS = {"us": 0, "µs": 0, "ms": 3, "s": 6}


class Result(NamedTuple):
    gate: Gate
    measured: float | None  # in the gate's unit; None when nothing was measured
    passed: bool
    shown: str  # the measured value as printed
    window: str = ""  # a disrupt: gate's window: the schedule's item (a result per window)

    @property
    def label(self) -> str:
        if self.gate.metric == WORKERS:  # no gate the user wrote: the run's workers, all there or not
            return WORKERS
        if not self.window:
            return self.gate.label
        return self.gate.label.replace(f"{DISRUPT} ", f"{DISRUPT} {self.window} ", 1)

    def line(self) -> str:
        if self.gate.metric == WORKERS:
            return f"SLA {WORKERS}: {self.shown} {'PASS' if self.passed else 'FAIL'}"
        return f"SLA {self.label} {self.gate.limit}: {self.shown} {'PASS' if self.passed else 'FAIL'}"


# -- evaluation (pure: the histograms and counts are passed in) --


class Measurements(NamedTuple):
    """What the gates are checked against: histograms in microseconds, Locust's counts per request name."""

    histograms: dict[str, HdrHistogram]  # per request name, service series (all request types merged)
    requests: dict[str, int]  # per request name, failures included
    failures: dict[str, int]
    duration_s: float  # from the run's first request to its last


def _total_histogram(histograms: dict[str, HdrHistogram]) -> HdrHistogram:
    total = hdr.new_histogram()
    for histogram in histograms.values():
        if histogram.total_count:
            total.add(histogram)
    return total


def evaluate(gate: Gate, data: Measurements) -> Result:
    if gate.name is not None and gate.name not in data.requests and gate.name not in data.histograms:
        return Result(gate, None, False, f"no request named {gate.name!r} ran")
    requests = data.requests.get(gate.name, 0) if gate.name else sum(data.requests.values())
    if gate.metric == "errors":
        failures = data.failures.get(gate.name, 0) if gate.name else sum(data.failures.values())
        if gate.unit == "%":
            if not requests:
                return Result(gate, None, False, "no requests")
            share = 100.0 * failures / requests
            return Result(
                gate, share, OPERATORS[gate.op](share, gate.threshold), f"{share:.3f}% ({failures} of {requests})"
            )
        return Result(gate, failures, OPERATORS[gate.op](failures, gate.threshold), f"{failures} (of {requests})")
    if gate.metric == "qps":
        if not requests or data.duration_s <= 0:
            return Result(gate, None, False, "no requests")
        qps = requests / data.duration_s
        return Result(gate, qps, OPERATORS[gate.op](qps, gate.threshold), f"{qps:.1f}/s")
    histogram = data.histograms.get(gate.name) if gate.name else _total_histogram(data.histograms)
    if histogram is None or not histogram.total_count:
        return Result(gate, None, False, "no successful request")
    if gate.metric == "percentile":
        micros = hdr.percentiles_us(histogram, (gate.percentile,))[0]
    elif gate.metric == "max":
        micros = histogram.get_max_value()
    else:
        micros = hdr.mean_us(histogram)
    value = micros / LATENCY_UNITS[gate.unit]
    shown = f"{value:.{DECIMALS[gate.unit]}f}{gate.unit}"
    return Result(gate, value, OPERATORS[gate.op](value, gate.threshold), shown)


def evaluate_all(gates: tuple[Gate, ...], data: Measurements) -> list[Result]:
    """The gates on requests; ``disrupt:`` gates are judged per window (``disruption_gates``)."""
    return [evaluate(gate, data) for gate in request_gates(gates)]


# -- the run --


def measurements(environment, recorder: LatencyRecorder) -> Measurements:
    """The merged figures of the run: exact histograms from the recorder, counts from Locust's stats."""
    histograms: dict[str, HdrHistogram] = {}
    for row in recorder.snapshot():
        if row.series != SERVICE or (row.type, row.name) == ("", AGGREGATED):
            continue
        histogram = recorder.histogram(row.type, row.name)
        if histogram is None:
            continue
        merged = histograms.get(row.name)
        if merged is None:
            merged = histograms[row.name] = hdr.new_histogram()
        merged.add(histogram)
    stats = environment.stats
    requests: dict[str, int] = {}
    failures: dict[str, int] = {}
    for (name, _method), entry in stats.entries.items():
        requests[name] = requests.get(name, 0) + entry.num_requests
        failures[name] = failures.get(name, 0) + entry.num_failures
    # the exact window of PREFIX_latency.csv (First, Last), merged from the workers; Locust's starts with the test
    duration = 0.0
    if recorder.first_request is not None and recorder.last_request is not None:
        duration = max(0.0, recorder.last_request - recorder.first_request)
    elif stats.last_request_timestamp and stats.start_time:
        duration = max(0.0, stats.last_request_timestamp - stats.start_time)
    return Measurements(histograms, requests, failures, duration)


def judge(
    environment, recorder: LatencyRecorder, gates: tuple[Gate, ...], judged: Sequence[Result] = ()
) -> list[Result]:
    """The gates against the run's final figures, then ``judged`` (the ``disrupt:`` gates' results per window); a
    failed gate logs one line."""
    on_requests = request_gates(gates)
    results = evaluate_all(on_requests, measurements(environment, recorder)) if on_requests else []
    results += judged
    failed = [result for result in results if not result.passed]
    if failed:
        logger.error("SLA: %s", failed_gates(results))
    return results


def failed_gates(results: Sequence[Result]) -> str:
    """``2 of 3 gates failed (put p99 < 15ms, …)``; a ``disrupt:`` gate has a result per window, counted once."""
    failed = [result for result in results if not result.passed]
    return "{} of {} gates failed ({})".format(
        len(dict.fromkeys(result.gate for result in failed)),
        len(dict.fromkeys(result.gate for result in results)),
        ", ".join(f"{result.label} {result.gate.limit}" for result in failed),
    )


def exit_verdict(results: Sequence[Result]) -> ExitVerdict | None:
    """The run's verdict when a gate failed (a lost worker's among them); None when every gate passed."""
    if all(result.passed for result in results):
        return None
    return ExitVerdict(SLA_EXIT_CODE, failed_gates(results))


def print_results(results: list[Result]) -> None:
    """One line per gate, after Locust's summary tables, where a pipeline's log ends."""
    for result in results:
        _console.info(result.line())
