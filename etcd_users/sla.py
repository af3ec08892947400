"""SLA gates (``--etcd-sla``): thresholds on the run's exact latencies, error share and throughput.

    --etcd-sla 'put:p99<15ms,range/serializable:p99.9<10ms,errors<0.1%'

A gate is ``[NAME:]METRIC OP VALUE``, gates are comma-separated:

- NAME: a request name (``put``, ``range/serializable``, ...); none, or ``*``, for all requests together;
- METRIC: ``pNN`` (``p50``, ``p95``, ``p99``, ``p99.9``; ``p999`` is read as 99.9), ``mean`` or ``max``, from the
  exact HDR histograms of ``etcd_users.latency`` (successful requests; unit ``us``, ``ms`` or ``s``);
  ``errors``: failed requests from Locust's stats, as a share (``errors<0.1%``) or a count (``errors<=0``);
  ``qps``: requests per second from the run's first request to its last, failures included;
- OP: ``<``, ``<=``, ``>``, ``>=``.

The gates are checked on the master (or the single process) when Locust quits, after the workers' last reports
are merged; each is printed with its measured value and PASS or FAIL. When any fails the exit code is
``SLA_EXIT_CODE`` (3), distinct from Locust's 1 for failed requests and the 2 of bad input. A gate whose request
name never ran fails: a misspelt name must not pass unnoticed.
"""

from locust import events
from locust.runners import WorkerRunner

import logging
import operator
import re
from collections.abc import Callable
from typing import NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import latency
from etcd_users.options import SettingsError

logger = logging.getLogger(__name__)
# where Locust prints its summary (plain lines on stderr, and --logfile, and the web UI's log tab)
_console = logging.getLogger("locust.stats_logger")

SLA_EXIT_CODE = 3
AGGREGATED = latency.AGGREGATED

LATENCY_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}  # to microseconds
_DECIMALS = {"us": 0, "µs": 0, "ms": 3, "s": 6}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_GATE = re.compile(
    r"""^\s*(?:(?P<name>.*\S)\s*:)?\s*
        (?P<metric>[A-Za-z][A-Za-z0-9.]*)\s*
        (?P<op><=|>=|<|>)\s*
        (?P<value>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*
        (?P<unit>[A-Za-zµ%/]+)?\s*$""",
    re.VERBOSE,
)
_EXAMPLE = "put:p99<15ms, p99.9<=10ms, errors<0.1% or qps>1000"


class SlaError(SettingsError):
    """A gate that cannot be read, told in one line."""


class Gate(NamedTuple):
    """One threshold. ``name`` None: all requests. ``percentile`` for pNN gates; ``threshold`` in ``unit``."""

    text: str
    name: str | None
    metric: str  # "percentile", "mean", "max", "errors", "qps"
    percentile: float | None
    op: str
    threshold: float
    unit: str  # a latency unit, "%" or "" (errors as a count, qps)

    @property
    def label(self) -> str:
        metric = _percentile_label(self.percentile) if self.metric == "percentile" else self.metric
        return f"{self.name or AGGREGATED} {metric}"

    @property
    def limit(self) -> str:
        return f"{self.op} {self.threshold:g}{self.unit}"


class Result(NamedTuple):
    gate: Gate
    measured: float | None  # in the gate's unit; None when nothing was measured
    passed: bool
    shown: str  # the measured value as printed

    def line(self) -> str:
        return f"SLA {self.gate.label} {self.gate.limit}: {self.shown} {'PASS' if self.passed else 'FAIL'}"


def _percentile_label(percentile: float | None) -> str:
    return f"p{percentile:g}"


def _error(gate: str, why: str) -> SlaError:
    return SlaError(f"--etcd-sla: {gate!r} {why}: expected NAME:METRIC<VALUE such as {_EXAMPLE}")


def _percentile(gate: str, digits: str) -> float:
    # p999 and p9999 are the usual shorthand for 99.9 and 99.99
    if "." not in digits and len(digits) > 2 and digits.startswith("99"):
        digits = f"99.{digits[2:]}"
    try:
        value = float(digits)
    except ValueError:
        raise _error(gate, "has an unknown metric") from None
    if not 0 < value <= 100:
        raise _error(gate, f"asks for percentile {digits}, outside 0-100")
    return value


def parse_gate(text: str) -> Gate:
    """One gate such as ``put:p99<15ms``; SlaError names the gate and the expected form."""
    gate = text.strip()
    match = _GATE.match(gate)
    if match is None:
        raise _error(gate, "is not a gate")
    name = match["name"]
    name = None if name is None or name.strip() in ("", "*") else name.strip()
    metric_text, op, unit = match["metric"].lower(), match["op"], (match["unit"] or "").lower()
    threshold = float(match["value"])
    if metric_text.startswith("p") and metric_text[1:2].isdigit():
        metric, percentile = "percentile", _percentile(gate, metric_text[1:])
    elif metric_text in ("mean", "avg", "max"):
        metric, percentile = ("max" if metric_text == "max" else "mean"), None
    elif metric_text in ("errors", "qps"):
        metric, percentile = metric_text, None
    else:
        raise _error(gate, f"has an unknown metric {match['metric']!r} (pNN, mean, max, errors or qps)")
    if metric in ("percentile", "mean", "max"):
        if unit not in LATENCY_UNITS:
            why = "has no unit" if not unit else f"has the unit {unit!r}"
            raise _error(gate, f"{why} (latencies take us, ms or s)")
    elif metric == "errors":
        if unit not in ("", "%"):
            raise _error(gate, f"has the unit {unit!r} (errors take % for a share, none for a count)")
        if unit == "%" and threshold > 100:
            raise _error(gate, "asks for more than 100% of errors")
    elif unit not in ("", "/s"):
        raise _error(gate, f"has the unit {unit!r} (qps takes none: requests per second)")
    else:
        unit = ""
    return Gate(gate, name, metric, percentile, op, threshold, unit)


def parse_gates(text: str) -> tuple[Gate, ...]:
    """``--etcd-sla``: comma-separated gates; empty text, no gates."""
    return tuple(parse_gate(part) for part in text.split(",") if part.strip())


# -- evaluation (pure: the histograms and counts are passed in) --


class Measurements(NamedTuple):
    """What the gates are checked against: histograms in microseconds, Locust's counts per request name."""

    histograms: dict[str, HdrHistogram]  # per request name, service series (all request types merged)
    requests: dict[str, int]  # per request name, failures included
    failures: dict[str, int]
    duration_s: float  # from the run's first request to its last


def _total_histogram(histograms: dict[str, HdrHistogram]) -> HdrHistogram:
    total = latency.new_histogram()
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
        micros = latency.percentiles_us(histogram, (gate.percentile,))[0]
    elif gate.metric == "max":
        micros = histogram.get_max_value()
    else:
        micros = latency.mean_us(histogram)
    value = micros / LATENCY_UNITS[gate.unit]
    shown = f"{value:.{_DECIMALS[gate.unit]}f}{gate.unit}"
    return Result(gate, value, OPERATORS[gate.op](value, gate.threshold), shown)


def evaluate_all(gates: tuple[Gate, ...], data: Measurements) -> list[Result]:
    return [evaluate(gate, data) for gate in gates]


# -- the run --


def measurements(environment) -> Measurements:
    """The merged figures of the run: exact histograms from ``etcd_users.latency``, counts from Locust's stats."""
    recorder = latency.recorder(environment)
    histograms: dict[str, HdrHistogram] = {}
    for row in recorder.snapshot():
        if row.series != latency.SERVICE or (row.type, row.name) == ("", AGGREGATED):
            continue
        histogram = recorder.histogram(row.type, row.name)
        if histogram is None:
            continue
        merged = histograms.get(row.name)
        if merged is None:
            merged = histograms[row.name] = latency.new_histogram()
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


_ran = False  # a test started in this process: only then is there a run to judge
_results: list[Result] | None = None  # judged at quitting, printed at quit


def _judges(environment) -> bool:
    runner = environment.runner
    return runner is not None and not isinstance(runner, WorkerRunner)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs) -> None:
    global _ran
    if _judges(environment):
        _ran = True


@events.quitting.add_listener
def _on_quitting(environment, **_kwargs) -> None:
    # Registered at import, before Locust creates its runner: with quitting fired in reverse, this runs after the
    # master's own listener has sent "quit" and waited for the workers' last reports, so the data is final.
    global _results
    _results = None
    if not _judges(environment) or not _ran:
        return
    try:
        gates = parse_gates(getattr(environment.parsed_options, "etcd_sla", "") or "")
    except SlaError as error:  # only the web UI's form can get here; the command line is checked at start
        logger.error("locust-etcd: error: %s", error)
        return
    if not gates:
        return
    results = evaluate_all(gates, measurements(environment))
    _results = results
    failed = [result for result in results if not result.passed]
    if failed:
        environment.process_exit_code = SLA_EXIT_CODE
        logger.error(
            "SLA: %d of %d gates failed (%s); exit code %d",
            len(failed),
            len(results),
            ", ".join(f"{result.gate.label} {result.gate.limit}" for result in failed),
            SLA_EXIT_CODE,
        )


@events.quit.add_listener
def _on_quit(**_kwargs) -> None:
    # after Locust's summary tables, where a pipeline's log ends
    global _results
    results, _results = _results, None
    for result in results or ():
        _console.info(result.line())
