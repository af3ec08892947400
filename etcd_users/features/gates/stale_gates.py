"""``stale:`` gates (``--etcd-sla``): how far behind the serializable reads were, judged on the worst member. Pure.

``stale:p99<100ms`` reads the milliseconds behind, ``stale:revisions:p99<50`` the revisions behind, from each member's
histograms (``etcd_users.audit_trail.staleness``). A run without a measured serializable read fails the gate ("no
figure"): an unmeasured cluster must not pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from etcd_users import hdr
from etcd_users.audit_trail.staleness import MemberStaleness
from etcd_users.judging.sla import DECIMALS, Result
from etcd_users.judging.sla_specs import LATENCY_UNITS, OPERATORS, STALE_REVISIONS, Gate


def judge(gates: Sequence[Gate], members: dict[str, MemberStaleness]) -> list[Result]:
    return [judge_gate(gate, members) for gate in gates]


def judge_gate(gate: Gate, members: dict[str, MemberStaleness]) -> Result:
    measured = {member: figures for member, figures in members.items() if figures.revisions.total_count}
    if not measured:
        return Result(gate, None, False, "no figure: no serializable read was measured against this process's writes")
    revisions = gate.name == STALE_REVISIONS
    values = {}
    for member, figures in measured.items():
        histogram = figures.revisions if revisions else figures.micros
        if gate.metric == "max":
            value = histogram.max_value
        else:
            value = hdr.percentiles_us(histogram, (gate.percentile,))[0]
        values[member] = value if revisions else value / LATENCY_UNITS[gate.unit]
    worst = max(values, key=values.get)
    value = values[worst]
    shown = f"{value:g}" if revisions else f"{value:.{DECIMALS[gate.unit]}f}{gate.unit}"
    return Result(gate, value, OPERATORS[gate.op](value, gate.threshold), f"{shown} ({worst})")
