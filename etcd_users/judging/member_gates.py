"""``member:`` gates (``--etcd-sla``): thresholds on the members' own metrics, judged on the worst member. Pure.

The figures come from ``etcd_users.members.member_figures`` over the run (or a shape's level). Without a
single scrape of a member in the span the gate fails with "no figure": an unmeasured cluster must not pass. A cluster
that answered but whose figure does not exist passes, told why: a one-member cluster has no peers to time, and a span
without any WAL fsync (no write) had no slow one.
"""

from __future__ import annotations

from collections.abc import Sequence

from etcd_users.judging.sla import DECIMALS, Result
from etcd_users.judging.sla_specs import LATENCY_UNITS, MEMBER_METRICS, OPERATORS, Gate
from etcd_users.members.member_figures import MemberFigures


def judge(gates: Sequence[Gate], figures: MemberFigures) -> list[Result]:
    return [judge_gate(gate, figures) for gate in gates]


def judge_gate(gate: Gate, figures: MemberFigures) -> Result:
    if not figures.scraped:
        return Result(gate, None, False, "no figure: no scrape of a member's /metrics succeeded")
    name, kind = MEMBER_METRICS[gate.metric]
    figure = figures.figures[name]
    if figure.value is None:
        if name == "peer_rtt_p99_ms" and not figures.peers:
            return Result(gate, None, True, "no peers (one member)")
        if kind == "latency":
            return Result(gate, None, True, "no samples in the span")
        return Result(gate, None, False, "no figure: fewer than two scrapes of a member")
    if kind == "latency":
        value = figure.value * 1000.0 / LATENCY_UNITS[gate.unit]  # the figure is in ms
        shown = f"{value:.{DECIMALS[gate.unit]}f}{gate.unit}"
    elif kind == "%":
        value, shown = figure.value, f"{figure.value:.1f}%"
    else:
        value, shown = figure.value, f"{figure.value:g}"
    return Result(gate, value, OPERATORS[gate.op](value, gate.threshold), f"{shown} ({figure.member})")
