"""``--max-regress``: how much worse a figure may get before the comparison calls it a regression.

Grammar: comma-separated ``METRIC:CHANGE`` items, e.g. ``p99:+15%,qps:-10%,errors:+0.1pp``. METRIC is one of
``qps``, ``p50``, ``p99``, ``p99.9``, ``errors``; CHANGE is signed in the direction that is worse (``+`` for
latencies and errors, ``-`` for QPS), in ``%`` of the baseline for QPS and latencies and in percentage points
(``pp``) for the error rate. Metrics not given keep their default.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

OPTION = "--max-regress"


@dataclass(frozen=True)
class Metric:
    key: str  # as written in --max-regress
    title: str  # in the table
    higher_is_worse: bool
    unit: str  # of the tolerance and the difference: "%" (relative) or "pp" (percentage points)
    default: float  # tolerance, positive, in ``unit``


METRICS = (
    Metric("qps", "QPS", False, "%", 10.0),
    Metric("p50", "P50 (ms)", True, "%", 15.0),
    Metric("p99", "P99 (ms)", True, "%", 15.0),
    Metric("p99.9", "P99.9 (ms)", True, "%", 25.0),
    Metric("errors", "error %", True, "pp", 0.1),
)
BY_KEY = {metric.key: metric for metric in METRICS}
LATENCY_PERCENTILES = {"p50": 50.0, "p99": 99.0, "p99.9": 99.9}

_ITEM = re.compile(r"^(?P<metric>[a-z0-9.]+):(?P<sign>[+-]?)(?P<number>\d+(?:\.\d+)?)(?P<unit>%|pp)$")


class ToleranceError(ValueError):
    """A --max-regress that does not follow the grammar; its text is the one line the user sees."""


def defaults_text() -> str:
    return ",".join(f"{metric.key}:{_signed(metric, metric.default)}" for metric in METRICS)


def _signed(metric: Metric, value: float) -> str:
    return f"{'+' if metric.higher_is_worse else '-'}{value:g}{metric.unit}"


def parse_tolerances(text: str | None) -> dict[str, float]:
    """The tolerance of every metric: the defaults, overridden by ``text``'s items."""
    tolerances = {metric.key: metric.default for metric in METRICS}
    if text is None:
        return tolerances
    if not text.strip():
        raise ToleranceError(f"{OPTION} is empty: give items like {defaults_text()}")
    seen = set()
    for item in text.split(","):
        item = item.strip()
        match = _ITEM.match(item)
        if not match:
            raise ToleranceError(f"{OPTION}: {item!r} is not METRIC:CHANGE, e.g. p99:+15% or errors:+0.1pp")
        key = match["metric"]
        metric = BY_KEY.get(key)
        if metric is None:
            raise ToleranceError(f"{OPTION}: unknown metric {key!r} in {item!r}; known: {', '.join(BY_KEY)}")
        if key in seen:
            raise ToleranceError(f"{OPTION}: {key} is given twice")
        seen.add(key)
        if match["unit"] != metric.unit:
            raise ToleranceError(f"{OPTION}: {key} takes {metric.unit}, as in {key}:{_signed(metric, metric.default)}")
        worse_sign = "+" if metric.higher_is_worse else "-"
        if match["sign"] and match["sign"] != worse_sign:
            direction = "up" if metric.higher_is_worse else "down"
            raise ToleranceError(
                f"{OPTION}: {item!r}: {key} gets worse going {direction}; write {key}:{worse_sign}{match['number']}"
                f"{metric.unit}"
            )
        value = float(match["number"])
        if not math.isfinite(value):
            raise ToleranceError(f"{OPTION}: {item!r} is not a finite number")
        tolerances[key] = value
    return tolerances


def tolerance_text(metric: Metric, value: float) -> str:
    return _signed(metric, value)
