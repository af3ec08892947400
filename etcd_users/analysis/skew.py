"""How skewed a run's keys were: the theoretical share of requests to the hottest 1 % of keys, from the options in
its summary (``--etcd-key-distribution``, or a YCSB workload's own distribution)."""

from __future__ import annotations

from etcd_users.analysis.fairness import read_summary
from etcd_users.analysis.load import AnalysisError, Run
from etcd_users.distributions import KeyDistribution, parse_key_distribution
from etcd_users.ycsb import parse_workload

_UNSKEWED = ("uniform", "sequential")


def run_distribution(options: dict) -> tuple[KeyDistribution, int] | None:
    """The run's key distribution and key space size, None when the keys were not skewed (or the options do not say:
    a summary written by hand, or by another version)."""
    try:
        distribution = parse_key_distribution(str(options.get("etcd_key_distribution") or "uniform"))
        size = int(options.get("etcd_key_space_size") or 0)
        if distribution.kind == "uniform" and not options.get("etcd_sequential_keys"):
            workload = parse_workload(str(options.get("etcd_ycsb") or ""))
            if workload is not None:  # a YCSB preset draws by its own distribution unless another was asked for
                distribution = workload.distribution
    except (TypeError, ValueError):
        return None
    if distribution.kind in _UNSKEWED or size <= 0:
        return None
    return distribution, size


def skew_note(run: Run) -> str | None:
    """One note line on a run whose keys were skewed; None for uniform or sequential keys, or without a summary."""
    try:
        summary = read_summary(run)
    except AnalysisError:
        return None  # a summary of another schema: the comparison does without it
    found = run_distribution((summary or {}).get("options") or {})
    if found is None:
        return None
    distribution, size = found
    return (
        f"{run.label}: keys drawn {distribution}: in theory {100.0 * distribution.hottest_share(size):.1f}% of the "
        f"requests to the hottest 1% of the {size} keys."
    )
