"""Is the comparison fair? Every difference between the two sides besides what the user says changed.

From each run's ``PREFIX_summary.json`` (its "options" and "environment"): every option of Locust and of the tool
(those that only say where files go, how the run is reported or where it connects are left out: `IGNORED`), the
cluster's size and etcd version, the load side's cores and processes and its Python, Locust and grpcio versions;
and from ``PREFIX_client_cpu.csv``, a side whose load generator ran out of CPU (`analysis.client`). A run without a
summary gets one line saying its fairness could not be checked and what the comparison read instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from etcd_users.analysis import client
from etcd_users.analysis.load import AnalysisError, Run, optional_json
from etcd_users.files import SUFFIXES, SUMMARY_SCHEMA_VERSION

# options that do not change the load or the cluster: outputs, reporting, connection details, safety switches
IGNORED = re.compile(
    r"^(csv|html|json|log|web|master|worker|expect_workers|headless|headful|only_summary|print_stats|exit_code|"
    r"config|locustfile|class_picker|stop_timeout|autostart|autoquit|legacy_ui|skip_log|show_task|list_|tags|"
    r"exclude_tags|etcd_(prefix|cleanup|junit|prometheus|metrics_|profile_on_breach|allow_existing|skip_|endpoints|"
    r"cacert|cert|key$|user$|local_pprof))"
)
# short names the user may give to --changed, and the environment's facts
ALIASES = {
    "users": "num_users",
    "u": "num_users",
    "r": "spawn_rate",
    "t": "run_time",
    "rate": "etcd_user_rate",
    "key_size": "etcd_key_size",
    "value_size": "etcd_val_size",
    "val_size": "etcd_val_size",
    "etcd_value_size": "etcd_val_size",
    "version": "etcd_version",
    "members": "cluster_size",
}
ENVIRONMENT_FACTS = ("cluster_size", "etcd_version", "cores", "processes", "workers", "python", "locust", "grpcio")


def fact_name(text: str) -> str:
    """``--etcd-value-size``, ``etcd-val-size`` and ``etcd_val_size`` all name the option etcd_val_size."""
    name = text.strip().lstrip("-").replace("-", "_").lower()
    return ALIASES.get(name, name)


def parse_changed(text: str | None) -> set[str]:
    return {fact_name(part) for part in (text or "").split(",") if part.strip()}


def read_summary(run: Run) -> dict | None:
    """The run's summary, None when it has none; a summary of another schema is refused."""
    path = Path(run.prefix + SUFFIXES["summary"])
    document = optional_json(path)
    if document is None:
        return None
    if not isinstance(document, dict) or document.get("schema") != SUMMARY_SCHEMA_VERSION:
        found = document.get("schema") if isinstance(document, dict) else None
        raise AnalysisError(f"{path} has summary schema {found!r}; this reader knows {SUMMARY_SCHEMA_VERSION}")
    return document


def facts(summary: dict) -> dict[str, object]:
    """What a run was: its options (the ignored ones left out) and its environment, by fact name."""
    found: dict[str, object] = {}
    for name, value in (summary.get("options") or {}).items():
        if not IGNORED.match(name):
            found[name] = value
    environment = summary.get("environment") or {}
    cluster = environment.get("cluster") or {}
    load = environment.get("load") or {}
    members = cluster.get("members") or []
    found["cluster_size"] = cluster.get("size")
    versions = sorted({str(member.get("version")) for member in members if member.get("version")})
    found["etcd_version"] = "+".join(versions) or None
    for key in ("cores", "processes", "workers", "python", "locust", "grpcio"):
        found[key] = load.get(key)
    return found


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return ",".join(map(_shown, value)) or "[]"
    return str(value)


def _side_value(values: list[object]) -> str:
    shown = list(dict.fromkeys(_shown(value) for value in values))
    return shown[0] if len(shown) == 1 else " / ".join(shown)


def unfair_lines(baseline: list[Run], candidate: list[Run], changed: set[str]) -> list[str]:
    """One line per difference between the sides (not in ``changed``), then the runs whose fairness could not be
    checked, then the client-bound runs."""
    lines = []
    runs = {"baseline": baseline, "candidate": candidate}
    summaries = {role: [read_summary(run) for run in side] for role, side in runs.items()}
    if all(summary is not None for side in summaries.values() for summary in side):
        side_facts = {role: [facts(summary) for summary in found] for role, found in summaries.items()}
        names = list(dict.fromkeys(name for found in side_facts.values() for each in found for name in each))
        for name in names:
            if name in changed:
                continue
            values = {role: [each.get(name) for each in found] for role, found in side_facts.items()}
            shown = {role: _side_value(value) for role, value in values.items()}
            if shown["baseline"] != shown["candidate"]:
                lines.append(
                    f"unfair: {name} differs: baseline {shown['baseline']}, candidate {shown['candidate']} "
                    "(not in --changed)."
                )
    else:
        for role, found in summaries.items():
            missing = [run for run, summary in zip(runs[role], found, strict=True) if summary is None]
            if missing:
                lines.append(f"fairness not checked: {_missing_text(role, missing)}")
    for role, side in runs.items():
        for run in side:
            busiest = client.busiest(run.client_cpu)
            if client.client_bound(busiest):
                lines.append(
                    f"unfair: {role} run {run.label} was client-bound (its busiest Locust process wanted "
                    f"{busiest.demand_pct:.0f} % of a core): its figures measure the load generator, not etcd."
                )
    return lines


def _missing_text(role: str, runs: list[Run]) -> str:
    run = runs[0]
    others = f" and {len(runs) - 1} more run(s)" if len(runs) > 1 else ""
    read = [Path(run.prefix + SUFFIXES[kind]).name for kind in ("stats", "latency", "latency_history", "hlog")]
    read = [name for name in read if Path(run.prefix).with_name(name).is_file()]
    return (
        f"{role} run {run.label}{others} has no {Path(run.prefix + SUFFIXES['summary']).name} (options and "
        f"environment unknown); compared from {', '.join(read) or 'its CSVs'} only."
    )


def unknown_changed(baseline: list[Run], candidate: list[Run], changed: set[str]) -> list[str]:
    """--changed names that no summary knows (a typo would hide nothing but would go unnoticed)."""
    summaries = [read_summary(run) for run in [*baseline, *candidate]]
    if not changed or any(summary is None for summary in summaries):
        return []
    known = {name for summary in summaries for name in (summary.get("options") or {})} | set(ENVIRONMENT_FACTS)
    return sorted(changed - known)
