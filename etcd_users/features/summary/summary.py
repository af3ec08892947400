"""The run in one file: ``PREFIX_summary.json``, written by the master (or single process) at the end of every run with
``--csv PREFIX``, and with ``--etcd-perfdash FILE`` the latency percentiles in perfdash's format.

The summary holds what a comparison of two runs needs to tell whether they are comparable (every option's effective
value, the cluster and the load generator) and what each run gave: the figures of ``PREFIX_latency.csv``, every gate
judged, the shape's levels, the disruptions, the audit and the worst member's own figures. Its keys are
``etcd_users.files.SUMMARY_KEYS``; docs/summary.md describes them. It is written at quit, after the gates, the
disruptions and the audit are judged (at quitting) and after the exact latency files are whole, right before the run's
files are listed.

``RunSummary`` is the feature's hooks (``etcd_users.core.features``); ``summary`` and ``perfdash`` build the documents.
"""

import locust

import json
import logging
import math
import os
import platform
import time
from collections.abc import Iterable, Sequence
from pathlib import PurePath

import grpc

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.features import option_groups
from etcd_users.core.run_context import run_context
from etcd_users.features.summary.options import SummarySettings
from etcd_users.files import AGGREGATED, SECRET_SHOWN, SERVICE, SUFFIXES, SUMMARY_SCHEMA_VERSION
from etcd_users.judging.sla import Result
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import LatencyRow
from etcd_users.members.member_figures import member_figures
from etcd_users.members.preflight import MemberReport
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.gate_state import GateState
from etcd_users.run_state.watchers import WatchTallies
from etcd_users.settings import SettingsError

logger = logging.getLogger("etcd_users.reporting.summary")  # the name users' log filters know

PERFDASH_VERSION = "v1"
PERFDASH_METRIC = "latency"
# Locust's own options whose values are secrets
_SECRET_WORDS = ("password", "token", "secret")


class PerfdashError(Exception):
    """An unwritable --etcd-perfdash path, in one line."""


def check_perfdash_path(path: str) -> None:
    """At start-up, not after the run: the file's directory exists and is writable, and the path is no directory."""
    expanded = os.path.expanduser(path)
    directory = os.path.dirname(expanded) or "."
    if os.path.isdir(expanded):
        raise PerfdashError(f"--etcd-perfdash: {path} is a directory; give a file path such as out/perfdash.json")
    if not os.path.isdir(directory):
        raise PerfdashError(f"--etcd-perfdash: the directory {directory} does not exist; create it or give another")
    if not os.access(directory, os.W_OK) or (os.path.exists(expanded) and not os.access(expanded, os.W_OK)):
        raise PerfdashError(f"--etcd-perfdash: {path} cannot be written (permission denied); give a writable path")


# -- the documents (pure) --


def json_safe(value):
    """A value as JSON holds it: tuples and sets as lists, paths as text, NaN and infinities as null."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def secret_options() -> frozenset[str]:
    """The dests of the tool's options declared secret (the client key, the user's password)."""
    return frozenset(declared.dest for group in option_groups() for declared in group.options() if declared.secret)


def options_of(parsed_options, secrets: Iterable[str] = ()) -> dict:
    """Every option's effective value by dest, secrets replaced by SECRET_SHOWN (when set)."""
    hidden = frozenset(secrets)
    options = {}
    for dest, value in sorted(vars(parsed_options).items()):
        secret = dest in hidden or any(word in dest.lower() for word in _SECRET_WORDS)
        options[dest] = SECRET_SHOWN if secret and value else json_safe(value)
    return options


def cluster_of(reports: Sequence[MemberReport]) -> dict:
    """The members as the pre-flight found them at start-up."""
    members = [
        {
            "endpoint": report.url,
            "version": report.version or None,
            "is_leader": report.is_leader,
            "db_size_bytes": _integer(report.db_bytes),
            "quota_bytes": _integer(report.quota_bytes),
        }
        for report in reports
    ]
    leader = next((member["endpoint"] for member in members if member["is_leader"]), None)
    quota = next((member["quota_bytes"] for member in members if member["quota_bytes"] is not None), None)
    return {"size": len(members), "leader": leader, "quota_bytes": quota, "members": members}


def _integer(value: float | None) -> int | None:
    return None if value is None or not math.isfinite(value) else int(value)


def _ms(value: float | None) -> float | None:
    """As PREFIX_latency.csv writes it: to the microsecond."""
    return None if value is None else round(value, 3)


def failures_by_label(errors: Iterable[tuple[str, str, str, int]]) -> dict[tuple[str, str], dict[str, int]]:
    """``(type, name) -> {label: count}`` from Locust's errors ``(method, name, error, occurrences)``; the
    Aggregated row's under ``("", AGGREGATED)``."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    for method, name, error, occurrences in errors:
        for key in ((method, name), ("", AGGREGATED)):
            labels = found.setdefault(key, {})
            labels[error] = labels.get(error, 0) + occurrences
    return found


def requests_of(
    rows: Sequence[LatencyRow],
    first: float | None,
    last: float | None,
    errors: dict[tuple[str, str], dict[str, int]],
) -> list[dict]:
    """The rows of PREFIX_latency.csv (the Aggregated row included); QPS over the run's first to last request."""
    duration = (last - first) if first is not None and last is not None else 0.0
    return [
        {
            "type": row.type,
            "name": row.name,
            "series": row.series,
            "count": row.count,
            "failures": row.failures,
            "failures_by_label": dict(sorted(errors.get((row.type, row.name), {}).items())) if row.failures else {},
            "qps": round(row.count / duration, 3) if duration > 0 else None,
            "p50_ms": _ms(row.p50),
            "p90_ms": _ms(row.p90),
            "p95_ms": _ms(row.p95),
            "p99_ms": _ms(row.p99),
            "p99_9_ms": _ms(row.p999),
            "p99_99_ms": _ms(row.p9999),
            "max_ms": _ms(row.max_ms),
        }
        for row in rows
    ]


def gates_of(results: Sequence[Result]) -> list[dict]:
    """Every gate judged: a ``disrupt:`` gate once per window (named in brackets)."""
    return [
        {
            "gate": f"{result.gate.text} [{result.window}]" if result.window else result.gate.text,
            "value": json_safe(float(result.measured)) if result.measured is not None else None,
            "passed": result.passed,
        }
        for result in results
    ]


def preparation_of(hooks: Iterable[FeatureHooks]) -> dict | None:
    """What the features wrote before the run's measured window, by kind; None when nothing."""
    found = {hook.preparation.what: hook.preparation.to_dict() for hook in hooks if hook.preparation is not None}
    return found or None


def perfdash(requests: Sequence[dict]) -> dict:
    """perfdash's JSON: one data item per request name (service times; the Aggregated row as ``Aggregated``)."""
    items = [
        {
            "data": {"Perc50": request["p50_ms"], "Perc90": request["p90_ms"], "Perc99": request["p99_ms"]},
            "unit": "ms",
            "labels": {"Metric": PERFDASH_METRIC, "Operation": request["name"]},
        }
        for request in requests
        if request["series"] == SERVICE and request["p50_ms"] is not None
    ]
    return {"version": PERFDASH_VERSION, "dataItems": items}


def read_json(path: str, since: float) -> dict | None:
    """A file this run wrote (not older than ``since``), or None."""
    try:
        if os.stat(path).st_mtime < since:
            return None
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def write_json(path: str, document: dict) -> bool:
    partial = f"{path}.tmp"
    try:
        with open(partial, "w") as file:
            json.dump(document, file, indent=2, allow_nan=False)
        os.replace(partial, path)
    except (OSError, ValueError) as error:
        logger.error("locust-etcd: error: could not write %s: %s", path, getattr(error, "strerror", None) or error)
        return False
    return True


# -- the feature's hooks --


class RunSummary(FeatureHooks):
    """Writes the summary (and the perfdash file) at the end of each run of a master or single process."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.workers = 0

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        options = environment.parsed_options
        if run_context(environment).role.is_worker or not hasattr(options, "etcd_perfdash"):
            return
        try:
            path = SummarySettings.read_one(options, "perfdash")
            if path:
                check_perfdash_path(path)
        except (SettingsError, PerfdashError) as error:
            self.tool.fail(str(error))

    def on_test_start(self, environment, **_kwargs) -> None:
        role = run_context(environment).role
        if role.is_worker:
            return
        self.started_at, self.ended_at = time.time(), None
        self.workers = environment.runner.worker_count if role.is_master else 0

    def on_test_stop(self, environment, **_kwargs) -> None:
        self.ended_at = time.time()

    def on_run_files(self) -> None:
        environment = getattr(self.tool, "environment", None)
        if environment is None or run_context(environment).role.is_worker or not self.tool.ran:
            return
        options = environment.parsed_options
        if not hasattr(options, "etcd_perfdash"):
            return
        prefix = getattr(options, "csv_prefix", None)
        perfdash_path = SummarySettings.read_one(options, "perfdash")
        if not prefix and not perfdash_path:
            return
        try:
            document = self.summary(environment, prefix)
        except Exception:  # a report never stops the end of the run
            logger.exception("locust-etcd: could not make the run's summary")
            return
        if prefix:
            write_json(prefix + SUFFIXES["summary"], document)
        if perfdash_path:
            write_json(os.path.expanduser(perfdash_path), perfdash(document["requests"]))

    def summary(self, environment, prefix: str | None) -> dict:
        tool = self.tool
        recorder = tool.get(LatencyRecorder)
        started = self.started_at if self.started_at is not None else environment.stats.start_time
        ended = self.ended_at if self.ended_at is not None else time.time()
        errors = failures_by_label(
            (entry.method or "", entry.name, str(entry.error), entry.occurrences)
            for entry in environment.stats.errors.values()
        )
        context = run_context(environment)  # what the other features left: the members, the gates, the workers lost
        members, gates, watch = context.get(MembersSeen), context.get(GateState), context.get(WatchTallies).final
        rows = members.member_rows
        since = started or 0.0

        def run_file(kind: str) -> dict | None:
            return read_json(prefix + SUFFIXES[kind], since) if prefix else None

        shape = run_file("shape")
        return {
            "schema": SUMMARY_SCHEMA_VERSION,
            "started_at": started,
            "ended_at": ended,
            "duration_s": round(ended - started, 3) if started else None,
            "options": options_of(environment.parsed_options, secret_options()),
            "environment": {
                "cluster": cluster_of(members.preflight),
                "load": {
                    "cores": os.cpu_count(),
                    "processes": self.workers or 1,
                    "workers": self.workers,
                    "python": platform.python_version(),
                    "locust": locust.__version__,
                    "grpcio": grpc.__version__,
                },
            },
            "requests": requests_of(recorder.snapshot(), recorder.first_request, recorder.last_request, errors),
            "gates": gates_of(gates.results),
            "levels": shape.get("levels") if isinstance(shape, dict) else None,
            "capacity": run_file("capacity"),
            "disruptions": run_file("disruptions"),
            "audit": run_file("audit"),
            "skew": run_file("skew"),
            "staleness": (run_file("audit") or {}).get("staleness") or None,
            "members": member_figures(rows).to_dict() if rows is not None else None,
            "lost_workers": [lost.to_dict() for lost in gates.lost_workers],
            "watch": watch.summary() if watch is not None else None,
            "preparation": preparation_of(tool.feature_hooks),
            "tail": run_file("tail"),
        }
