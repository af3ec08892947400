"""``disrupt:`` gates (``--etcd-sla``): each judged on every window of ``--etcd-disrupt``, from its cost. Pure.

A window's cost (``etcd_users.judging.disruption_cost``, as the runner records it in ``PREFIX_disruptions.json``) is
per request name: a gate with a NAME reads that name's; without one, the gap and the latencies are the worst name's
(named after the value) and the errors are those of every name together. A gate gives one result per item of the
schedule, in the order of their times. An item the run ended before, an action that failed, or a window without data of
the gate's name fails the gate: a disruption that did not happen must not pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence

from etcd_users.judging.sla import DECIMALS, Result
from etcd_users.judging.sla_specs import LATENCY_UNITS, OPERATORS, Gate

_PERCENTILE_KEYS = {99.0: "p99_ms", 99.9: "p999_ms"}


def judge(gates: Sequence[Gate], items: Sequence[str], windows: Sequence[dict]) -> list[Result]:
    """``gates`` (the ``disrupt:`` ones) on each of ``items`` (the schedule's texts, ordered by time) and its
    window (``windows``: the runner's records, in the same order; fewer when the run ended first)."""
    results = []
    for gate in gates:
        for index, item in enumerate(items):
            window = windows[index] if index < len(windows) else None
            results.append(judge_window(gate, item, window))
    return results


def judge_window(gate: Gate, item: str, window: dict | None) -> Result:
    if window is None:
        return Result(gate, None, False, "not reached: the run ended first", item)
    if window.get("ok") is False:
        return Result(gate, None, False, f"the action failed: {window.get('error') or 'no reason given'}", item)
    costs = [entry for entry in window.get("cost") or [] if isinstance(entry, dict)]
    if gate.name is not None:
        costs = [entry for entry in costs if entry.get("name") == gate.name]
        if not costs:
            return Result(gate, None, False, f"no request named {gate.name!r} in the window", item)
    if not costs:
        return Result(gate, None, False, "no request in the window", item)
    if gate.metric == "errors":
        return _errors(gate, item, costs)
    return _worst(gate, item, costs)


def _errors(gate: Gate, item: str, costs: list[dict]) -> Result:
    requests = sum(int(entry.get("requests") or 0) for entry in costs)
    errors = sum(int(entry.get("errors") or 0) for entry in costs)
    if gate.unit != "%":
        return Result(gate, errors, OPERATORS[gate.op](errors, gate.threshold), f"{errors} (of {requests})", item)
    if not requests:
        return Result(gate, None, False, "no requests in the window", item)
    share = 100.0 * errors / requests
    passed = OPERATORS[gate.op](share, gate.threshold)
    return Result(gate, share, passed, f"{share:.3f}% ({errors} of {requests})", item)


def _in_unit(gate: Gate, entry: dict) -> float | None:
    """The entry's gap or percentile in the gate's unit; None when the window held no success of that name."""
    if gate.metric == "gap":  # to 10 ms where the run kept its timeline, else whole seconds
        gap_ms = entry.get("gap_ms")
        micros = float(gap_ms) * 1000 if gap_ms is not None else float(entry.get("gap_s") or 0) * 1_000_000
    else:
        millis = entry.get(_PERCENTILE_KEYS[gate.percentile])
        if millis is None:
            return None
        micros = float(millis) * 1000
    return micros / LATENCY_UNITS[gate.unit]


def _worst(gate: Gate, item: str, costs: list[dict]) -> Result:
    measured = [(value, str(entry.get("name", ""))) for entry in costs if (value := _in_unit(gate, entry)) is not None]
    if not measured:
        return Result(gate, None, False, "no successful request in the window", item)
    # the worst is the name furthest on the wrong side of the threshold: the largest for < and <=
    value, name = max(measured) if gate.op.startswith("<") else min(measured)
    if gate.metric == "gap":
        shown = f"{value:g}{gate.unit}"
    else:
        shown = f"{value:.{DECIMALS[gate.unit]}f}{gate.unit}"
    if gate.name is None:
        shown += f" ({name})"
    return Result(gate, value, OPERATORS[gate.op](value, gate.threshold), shown, item)
