"""A load shape's level judged on its own window: the ``--etcd-sla`` gates and the keep-up rule. Pure.

The same rules as ``analysis.levels`` applies after the run (``sla.evaluate`` on the window's merged histograms and
counts, achieved QPS against ``KEEP_UP`` of planned for QPS levels), so a verdict logged during the run is the one
the analysis prints. A level is judged over the whole seconds of its window (``etcd_users.latency.windows``); one
without any is not judged.
"""

from __future__ import annotations

from typing import NamedTuple

from hdrh.histogram import HdrHistogram

from etcd_users import hdr
from etcd_users.files import AGGREGATED, SERVICE
from etcd_users.judging import member_gates as on_members
from etcd_users.judging.sla import Measurements, Result, evaluate
from etcd_users.judging.sla_specs import LATENCY_UNITS, Gate, member_gates, request_gates
from etcd_users.latency.windows import WindowData
from etcd_users.members.member_figures import MemberFigures

KEEP_UP = 0.95
"""A QPS level fails when it achieved less than this share of its planned QPS."""
KEEP_UP_GATE = "keep-up"
"""The ``gate`` of the keep-up check (it is no ``--etcd-sla`` gate)."""
PASS = "pass"
FAIL = "FAIL"


class LevelCheck(NamedTuple):
    """One gate (or the keep-up rule) on one level. ``measured``: latency in ms, errors in % (or a count), QPS."""

    gate: str  # the gate as the user wrote it, or KEEP_UP_GATE
    passed: bool
    measured: float | None
    line: str  # e.g. "put p99 18.213ms > 15ms"

    def to_dict(self) -> dict:
        return {"gate": self.gate, "passed": self.passed, "measured": self.measured, "line": self.line}


class LevelVerdict(NamedTuple):
    name: str
    verdict: str | None  # PASS, FAIL, or None when the window holds no whole second
    checks: list[LevelCheck]
    seconds: int
    achieved_qps: float | None

    @property
    def failed(self) -> list[LevelCheck]:
        return [check for check in self.checks if not check.passed]

    def line(self) -> str:
        """The log line: ``level 'step 8': FAIL put p99 18.213ms > 15ms`` or ``level 'step 7': pass (...)``."""
        if self.verdict is None:
            return f"level '{self.name}': not judged (no whole second with its users all running)"
        if self.verdict == FAIL:
            return f"level '{self.name}': FAIL " + "; ".join(check.line for check in self.failed)
        return f"level '{self.name}': pass ({'; '.join(check.line for check in self.checks)})"


def window_measurements(window: WindowData) -> Measurements:
    """The window's figures as the gates read them: per request name the service histograms merged over request
    types, requests (failures included) and failures; the duration is the window's whole seconds."""
    histograms: dict[str, HdrHistogram] = {}
    requests: dict[str, int] = {}
    failures: dict[str, int] = {}
    for (_type, name, series), histogram in window.histograms.items():
        if series != SERVICE or name == AGGREGATED:
            continue
        merged = histograms.get(name)
        if merged is None:
            merged = histograms[name] = hdr.new_histogram()
        merged.add(histogram)
        requests[name] = requests.get(name, 0) + histogram.get_total_count()
    for (_type, name, series), count in window.failures.items():
        if series != SERVICE or name == AGGREGATED:
            continue
        requests[name] = requests.get(name, 0) + count
        failures[name] = failures.get(name, 0) + count
    return Measurements(histograms, requests, failures, float(window.seconds))


def judge_level(
    name: str,
    gates: tuple[Gate, ...],
    data: Measurements,
    planned_qps: float | None,
    members: MemberFigures | None = None,
) -> LevelVerdict:
    """The gates and, for a QPS level, the keep-up rule on one level's window; ``member:`` gates on ``members``, the
    members' figures over the window (None: not judged)."""
    seconds = int(data.duration_s)
    if seconds <= 0:
        return LevelVerdict(name, None, [], 0, None)
    checks = [_gate_check(gate, data) for gate in request_gates(gates)]  # disrupt: gates judge windows, not levels
    if members is not None:
        checks += [_check(on_members.judge_gate(gate, members)) for gate in member_gates(gates)]
    achieved = sum(data.requests.values()) / data.duration_s
    if planned_qps is not None:
        kept_up = achieved >= KEEP_UP * planned_qps
        relation = ">=" if kept_up else "<"
        line = f"achieved {achieved:.1f} QPS {relation} {100 * KEEP_UP:g}% of planned {planned_qps:g}"
        checks.append(LevelCheck(KEEP_UP_GATE, kept_up, achieved, line))
    verdict = FAIL if any(not check.passed for check in checks) else PASS
    return LevelVerdict(name, verdict, checks, seconds, achieved)


def _gate_check(gate: Gate, data: Measurements) -> LevelCheck:
    return _check(evaluate(gate, data))


def _check(result: Result) -> LevelCheck:
    gate = result.gate
    if result.measured is None:
        return LevelCheck(gate.text, result.passed, None, f"{gate.label}: {result.shown}")
    relation = "<" if result.measured < gate.threshold else ">" if result.measured > gate.threshold else "="
    line = f"{gate.label} {result.shown} {relation} {gate.threshold:g}{gate.unit}"
    measured = float(result.measured)
    if gate.unit in LATENCY_UNITS:
        measured = measured * LATENCY_UNITS[gate.unit] / 1000.0  # in ms, whatever unit the gate was written in
    return LevelCheck(gate.text, result.passed, measured, line)
