"""How skewed a run's keys were: the share of puts that went to the hottest 1 % of keys, counted from etcd's keys'
versions (``PREFIX_skew.json``, written by ``etcd_users.features.workload.key_skew``), and the theoretical share of
requests from the options in its summary (``--etcd-key-distribution``, or a YCSB workload's own distribution)."""

from __future__ import annotations

from etcd_users.analysis.fairness import read_summary
from etcd_users.analysis.load import AnalysisError, Run, optional_json
from etcd_users.workload_model.distributions import KeyDistribution, parse_key_distribution
from etcd_users.workload_model.ycsb import parse_workload

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
    """One note line on a run whose puts were counted, or whose keys were skewed; None for a run of uniform or
    sequential keys without the count, or without a summary."""
    counted = _counted(run)
    if counted is not None:
        return (
            f"{run.label}: {counted['writes']} puts to {counted['keys_written']} keys, "
            f"{100.0 * counted['hottest_share']:.1f}% of them to the hottest 1% ({counted['hottest_keys']} keys) "
            f"of the {counted['key_space_size']}, counted from etcd's keys' versions "
            f"(keys drawn {counted['distribution']}: {100.0 * counted['theoretical_share']:.1f}% in theory)."
        )
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


_COUNTED_FIELDS = {
    "writes": int,
    "keys_written": int,
    "hottest_keys": int,
    "key_space_size": int,
    "hottest_share": float,
    "theoretical_share": float,
    "distribution": str,
}


def _counted(run: Run) -> dict | None:
    """The run's ``PREFIX_skew.json``, None when absent or not of this shape (a file of another version)."""
    try:
        document = optional_json(run.path("skew"))
    except AnalysisError:
        return None
    if not isinstance(document, dict):
        return None
    try:
        return {name: kind(document[name]) for name, kind in _COUNTED_FIELDS.items()}
    except (KeyError, TypeError, ValueError):
        return None
