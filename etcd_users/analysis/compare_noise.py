"""Run-to-run noise, for a comparison with one run on a side: what a second run of the same settings on the same
machine would have measured differently, which no run's own seconds can show.

Two sources:

- **a calibration** (``python -m analysis calibrate RUNS --out FILE``, read by ``compare --noise FILE``): N runs of
  the same settings on the same machine; per request name and metric, the standard deviation of one run's figure
  over them (of its logarithm for QPS and latencies, in percentage points for errors);
- **the runs' own drift**: each run's second half against its first half. Halves of one run share the process, the
  member's state and most of the machine's other load, so their drift is a lower bound of run-to-run noise: it can
  widen an interval but never vouch for a verdict.

A difference of two single runs then has standard deviation ``sqrt(2) * spread``; the interval is the bootstrap's
(the run's own seconds) widened by it: each side's half-width ``hypot(bootstrap half, q * sqrt(2) * spread)`` with q
Student's t for the calibration's runs (1.96 for the drift).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from etcd_users.analysis.load import AnalysisError
from etcd_users.analysis.rank_test import Z_975
from etcd_users.analysis.resampling import t_quantile
from etcd_users.analysis.tolerance import METRICS, Metric

CALIBRATION_KIND = "etcd compare calibration"
CALIBRATION_SCHEMA = 1
CALIBRATION_OPTION = "--noise"
# with fewer runs the calibration's own spread is too uncertain to lean on (t at 1 degree of freedom is 12.7)
LEAST_CALIBRATION_RUNS = 3
CALIBRATED = "calibrated"
DRIFT = "drift"
RUNS = "runs"  # the repeats' own spread


@dataclass(frozen=True)
class Noise:
    """The standard deviation of one run's figure (log units, or pp for errors) and what it rests on."""

    spread: float
    source: str  # CALIBRATED, DRIFT or RUNS
    runs: int = 0  # the calibration's runs

    @property
    def quantile(self) -> float:
        return t_quantile(self.runs - 1) if self.source == CALIBRATED else Z_975


def scale(metric: Metric, value: float) -> float:
    """A figure on the scale its noise adds on: the logarithm for QPS and latencies, itself for the error rate."""
    if metric.unit != "%":
        return value
    return math.log(value) if value > 0 else math.nan


def spread(metric: Metric, values: list[float]) -> float:
    """The standard deviation of one run's figure over ``values`` (one per run), on ``scale``."""
    scaled = [scale(metric, value) for value in values]
    finite = [value for value in scaled if math.isfinite(value)]
    return float(np.std(finite, ddof=1)) if len(finite) >= 2 else math.nan


def drift_spread(halves: list[tuple[float, float]], metric: Metric) -> float:
    """From each run's (first half, second half) figures: the standard deviation of a half's figure, sqrt(mean of
    squared differences / 2) over the runs."""
    differences = [scale(metric, second) - scale(metric, first) for first, second in halves]
    finite = [value for value in differences if math.isfinite(value)]
    return math.sqrt(sum(value * value for value in finite) / (2 * len(finite))) if finite else math.nan


# -- the calibration file ---------------------------------------------------------------------------------------


@dataclass
class Calibration:
    path: Path
    runs: list[str]
    spreads: dict[str, dict[str, float]]  # name -> metric -> spread

    def noise(self, name: str, metric: Metric) -> tuple[Noise | None, str | None]:
        """The calibrated noise of a row, and a note when it is not the name's own: the widest of the calibration's
        names (a name it did not measure), or None when no name has the metric."""
        own = self.spreads.get(name, {}).get(metric.key)
        if own is not None and math.isfinite(own):
            return Noise(own, CALIBRATED, len(self.runs)), None
        others = [
            found[metric.key] for found in self.spreads.values() if math.isfinite(found.get(metric.key, math.nan))
        ]
        if not others:
            return None, None
        note = f"{self.path.name} has no {name!r}: its rows use the widest spread of the calibration's names."
        return Noise(max(others), CALIBRATED, len(self.runs)), note


def calibration_document(runs: list[str], seconds: list[int], figures: dict[str, list[dict[str, float]]]) -> dict:
    """``figures``: per name, one run's figures (metric -> value) per run."""
    spreads = {
        name: {
            metric.key: _json_number(spread(metric, [values[metric.key] for values in per_run])) for metric in METRICS
        }
        for name, per_run in figures.items()
    }
    return {
        "kind": CALIBRATION_KIND,
        "schema": CALIBRATION_SCHEMA,
        "runs": runs,
        "seconds": seconds,
        "spreads": spreads,
    }


def _json_number(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def read_calibration(path: Path) -> Calibration:
    fix = f"make one with: python -m analysis calibrate 'RUNS-*' --out {path}"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalysisError(f"{CALIBRATION_OPTION} {path}: no such file; {fix}") from None
    except (OSError, ValueError) as error:
        raise AnalysisError(f"{CALIBRATION_OPTION} {path}: not a calibration ({error}); {fix}") from None
    if not isinstance(document, dict) or document.get("kind") != CALIBRATION_KIND:
        raise AnalysisError(f"{CALIBRATION_OPTION} {path}: not a calibration; {fix}")
    if document.get("schema") != CALIBRATION_SCHEMA:
        raise AnalysisError(
            f"{CALIBRATION_OPTION} {path}: calibration schema {document.get('schema')}; this reader knows "
            f"{CALIBRATION_SCHEMA}; {fix}"
        )
    return calibration_of(document, path)


def calibration_of(document: dict, path: Path) -> Calibration:
    """A calibration document (as ``calibration_document`` makes it) as the comparison reads it."""
    spreads = {
        str(name): {key: math.nan if value is None else float(value) for key, value in found.items()}
        for name, found in document.get("spreads", {}).items()
    }
    return Calibration(path, [str(run) for run in document.get("runs", [])], spreads)
