"""Every file a run leaves, defined once: names, columns, the ``Aggregated`` row, series, hlog tags, ``suite.json``.

The writers (``etcd_users.latency``, ``etcd_users.members.server_metrics``, ``shapes``,
``etcd_users.suite``) and the readers (``analysis``) import these names, so a column renamed here is renamed on both
sides. Pure: no Locust.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# -- the files of one run, by their suffix after ``--csv PREFIX`` --

SUFFIXES = {
    "stats": "_stats.csv",
    "history": "_stats_history.csv",
    "failures": "_failures.csv",
    "exceptions": "_exceptions.csv",
    "latency": "_latency.csv",
    "latency_history": "_latency_history.csv",
    "hlog": "_latency.hlog",
    "shape": "_shape.json",
    "capacity": "_capacity.json",  # shapes.capacity: the capacity search's result
    "etcd_metrics": "_etcd_metrics.csv",
    "client_cpu": "_client_cpu.csv",
    "disruptions": "_disruptions.json",  # etcd_users.features.disruptions: each disruption's window
    "audit": "_audit.json",  # etcd_users.features.audit: the end-of-run audit's result
    # etcd_users.features.audit.evidence: a failed audit's offending keys, each member's view
    "evidence": "_evidence.json",
    "evidence_html": "_evidence.html",  # the same, a timeline per key
    "skew": "_skew.json",  # etcd_users.features.workload.key_skew: the puts per key counted from the keys' versions
    # etcd_users.features.audit.run: how far behind each member's serializable reads were
    "staleness": "_staleness.csv",
    # etcd_users.features.tail: the run's worst seconds with the events around them, and every event
    "tail": "_tail.json",
    "summary": "_summary.json",  # etcd_users.features.summary.summary: the run in one file, written at its end
}

# The name of the all-requests row, in Locust's CSVs and in ours.
AGGREGATED = "Aggregated"

# -- Locust's own CSVs: the columns the analysis reads --

LOCUST_STATS_COLUMNS = (
    *("Type", "Name", "Request Count", "Failure Count"),
    *("Average Response Time", "Min Response Time", "Max Response Time", "Requests/s"),
)
LOCUST_HISTORY_COLUMNS = ("Timestamp", "Type", "Name", "Total Request Count", "Total Failure Count")
LOCUST_FAILURES_COLUMNS = ("Method", "Name", "Error", "Occurrences")
LOCUST_EXCEPTIONS_COLUMNS = ("Count", "Message")
# Locust writes percentiles as integers in ms; these are the ones the tables use. Others are optional because
# Locust's percentile list can be changed.
LOCUST_PERCENTILE_COLUMNS = ("50%", "66%", "75%", "80%", "90%", "95%", "98%", "99%", "99.9%", "99.99%", "100%")

# -- the exact latency files (etcd_users.latency) --

# The series of a request: the response time the user measured, and the latency from the intended send time of
# rate-driven users (coordinated omission).
SERVICE = "service"
INTENDED = "intended"

LATENCY_SUMMARY_COLUMNS = (
    *("Type", "Name", "Series", "Count", "Failures", "Min", "Mean"),
    *("P50", "P90", "P95", "P99", "P99.9", "P99.99", "Max"),
    # the run's first and last request (unix seconds, all names): its exact duration, for QPS
    *("First", "Last"),
)
LATENCY_SUMMARY_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99)
LATENCY_HISTORY_COLUMNS = (
    *("Timestamp", "Type", "Name", "Series", "Requests", "Failures", "QPS"),
    *("P50", "P99", "P99.9", "Max"),
)
LATENCY_HISTORY_PERCENTILES = (50.0, 99.0, 99.9)

_UNSAFE_TAG_CHARACTERS = re.compile(r"[\s,]")


class HlogKey(NamedTuple):
    """What an interval of ``PREFIX_latency.hlog`` is of: its tag is ``TYPE:NAME:SERIES``."""

    type: str
    name: str
    series: str

    @property
    def tag(self) -> str:
        """HdrHistogram log tags may not hold commas or whitespace."""
        return tag_text(":".join(self))

    @classmethod
    def parse(cls, tag: str) -> HlogKey:
        request_type, _, rest = tag.partition(":")
        name, _, series = rest.rpartition(":")
        if not name:
            # A tag without a series is taken as the service time.
            name, series = rest, SERVICE
        return cls(request_type, name, series)


def tag_text(text: str) -> str:
    """``text`` as it appears in an hlog tag (a request name in a tag, for one)."""
    return _UNSAFE_TAG_CHARACTERS.sub("_", text)


# -- the members' /metrics, polled during the run (etcd_users.members.server_metrics) --

ETCD_METRICS_COLUMNS = (
    *("Timestamp", "Member"),
    *("IsLeader", "HasLeader", "LeaderChanges"),
    *("ProposalsCommitted", "ProposalsApplied", "ProposalsPending", "ProposalsFailed"),
    *("DbSizeBytes", "DbSizeInUseBytes", "QuotaBytes", "RssBytes", "CpuSeconds"),
    *("FsyncP99Ms", "BackendCommitP99Ms", "GrpcRequests"),
    *("Keys", "WatchStreams", "Watchers"),
    "Error",
    # later additions, absent from older files: the worst peer's round-trip P99 (empty on a one-member cluster),
    # the snapshot save P99, the slow applies so far, and the cumulative buckets of each duration histogram
    # (BUCKETS_FORMAT), from which a P99 over any span of the run is computed
    *("PeerRttP99Ms", "SnapshotSaveP99Ms", "SlowApplies"),
    *("FsyncBuckets", "BackendCommitBuckets", "PeerRttBuckets", "SnapshotSaveBuckets"),
    "OpenFds",  # the member's open files: its client connections plus a constant
)
# A histogram's cumulative buckets in one field: ``LE=COUNT;LE=COUNT;…`` with LE in seconds (``inf`` last);
# PeerRttBuckets holds one histogram per peer, each bucket as ``PEER@LE=COUNT``.
BUCKETS_FORMAT = "LE=COUNT;…"
ETCD_METRICS_BUCKET_COLUMNS = ("FsyncBuckets", "BackendCommitBuckets", "PeerRttBuckets", "SnapshotSaveBuckets")
# What the analysis needs of that file; the other columns are optional.
ETCD_METRICS_REQUIRED_COLUMNS = (
    *("Timestamp", "Member", "IsLeader", "LeaderChanges", "ProposalsCommitted", "ProposalsApplied"),
    *("DbSizeBytes", "RssBytes", "CpuSeconds", "FsyncP99Ms", "Error"),
)

# -- the members at the first breach (etcd_users.features.monitoring.breach): a directory, PREFIX_breach/ --

BREACH_DIRECTORY_SUFFIX = "_breach"  # a directory, not a file: kept out of SUFFIXES
BREACH_CAPTURE = "capture.json"  # why, when, and each member's files (or why not) under their host_port directory
# kind -> file name in PREFIX_breach/<host_port>/; the .pb.gz files are gzipped pprof protobufs (go tool pprof)
BREACH_FILES = {
    "profile": "profile.pb.gz",
    "goroutine": "goroutine.txt",
    "heap": "heap.pb.gz",
    "metrics": "metrics.txt",
}

# -- each Locust process's own CPU, once a second (etcd_users.latency.client_cpu) --

# Timestamp: the unix second T of the interval [T, T+1) (longer when the process was too busy to sample on time);
# Process: MASTER_PROCESS, LOCAL_PROCESS (a run without workers) or a worker's id (Locust's client_id);
# CpuPct: the CPU the process used over the interval, in percent of one core (all its threads: above 100 is possible);
# WaitPct: the time its users' thread was ready to run but waited for a CPU (Linux run queue), in percent of the
# interval; empty where the system does not say.
CLIENT_CPU_COLUMNS = ("Timestamp", "Process", "CpuPct", "WaitPct")
# a process whose CpuPct + WaitPct (mean over a window) reach this had no CPU to spare: client-bound
CLIENT_BOUND_PCT = 90.0
MASTER_PROCESS = "master"
LOCAL_PROCESS = "local"

# -- the columns each reader requires, by file kind --

REQUIRED_COLUMNS = {
    "stats": LOCUST_STATS_COLUMNS,
    "history": LOCUST_HISTORY_COLUMNS,
    "failures": LOCUST_FAILURES_COLUMNS,
    "exceptions": LOCUST_EXCEPTIONS_COLUMNS,
    "latency": LATENCY_SUMMARY_COLUMNS[:-2],  # First and Last came later; older files lack them
    "latency_history": LATENCY_HISTORY_COLUMNS,
    "etcd_metrics": ETCD_METRICS_REQUIRED_COLUMNS,
    "client_cpu": CLIENT_CPU_COLUMNS[:3],  # WaitPct is optional
}
# Columns read as text; every other column of a CSV is numeric.
TEXT_COLUMNS = frozenset(
    {"Type", "Name", "Series", "Method", "Error", "Message", "Traceback", "Nodes", "First Seen", "Last Seen"}
    | {"Member", "GrpcRequests", *ETCD_METRICS_BUCKET_COLUMNS}
    | {"Process"}
)

# -- how far behind each member's serializable reads were, PREFIX_staleness.csv (etcd_users.features.audit.run) --

# a row per member (host:port): its serializable reads judged, then the revisions and the milliseconds it was behind
# the newest write acknowledged to the reading process when each read was sent (P50, P99, max; HDR histograms)
STALENESS_COLUMNS = (
    *("Member", "Reads"),
    *("RevisionsP50", "RevisionsP99", "RevisionsMax"),
    *("MsP50", "MsP99", "MsMax"),
)
STALENESS_FIELDS = ("member", "reads", "revisions_p50", "revisions_p99", "revisions_max", "ms_p50", "ms_p99", "ms_max")

# -- the disruptions' windows, PREFIX_disruptions.json (etcd_users.features.disruptions.runner writes, the analysis
# reads) --

DISRUPTIONS_SCHEMA_VERSION = 1
# each of its "windows": the item of the schedule, the members acted on, when (unix seconds), and how it went
DISRUPTION_WINDOW_KEYS = (
    *("item", "action", "members", "requested_at", "started_at", "finished_at", "ok", "result", "error"),
)

# -- the run in one file, PREFIX_summary.json (etcd_users.features.summary.summary writes it, the analysis reads it) --

# Its "schema" key; a reader refuses any other version.
SUMMARY_SCHEMA_VERSION = 1
SUMMARY_KEYS = (
    *("schema", "started_at", "ended_at", "duration_s", "options", "environment", "requests", "gates"),
    *("levels", "capacity", "disruptions", "audit", "members"),
    "lost_workers",  # later: absent from older files
    "skew",  # later: the puts per key counted from the keys' versions (PREFIX_skew.json), absent from older files
    "watch",  # later: the watch workloads' figures and whether the client kept up (null without watch events)
    "preparation",  # later: what the run wrote before its measured window, by kind (null when nothing)
    "staleness",  # later: PREFIX_staleness.csv's rows, a dict per member (null without serializable reads measured)
    "tail",  # later: the worst seconds with their causes and every event (PREFIX_tail.json; null with --etcd-tail 0)
)
# each of its "preparation" (etcd_users.workload_model.preparation), under "key_space" (the reads' key space) or
# "kubernetes" (the prefill): the keys the run starts with, those written (the others existed), the seconds it took, and
# why it stopped short (null when complete)
SUMMARY_PREPARATION_KEYS = ("keys", "written", "seconds", "error")
# its "watch" (etcd_users.features.watchers.run): EtcdWatcherUser's watchers and events, and the progress intervals with
# watch events in which the client process was busy (a whole core wanted, or its loop behind) of all those with events:
# client_bound when half
SUMMARY_WATCH_KEYS = (
    "watchers",
    "events",
    "events_per_s",
    "cancelled",
    "client_bound",
    "busy_intervals",
    "event_intervals",
)
# each of its "lost_workers": a worker that went silent mid-run (etcd_users.members.lost_workers), when (its
# last heartbeat, unix seconds and seconds into the run), its users and the run's then, and when it came back (or null)
SUMMARY_LOST_WORKER_KEYS = ("worker", "at", "at_s", "users", "run_users", "returned_at")
# each of its "requests": the figures of a row of PREFIX_latency.csv
SUMMARY_REQUEST_KEYS = (
    *("type", "name", "series", "count", "failures", "failures_by_label", "qps"),
    *("p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "p99_99_ms", "max_ms"),
)
# its "members": the worst member over the run, each {"value": number or null, "member": URL or null}
SUMMARY_MEMBER_FIGURES = (
    *("fsync_p99_ms", "commit_p99_ms", "peer_rtt_p99_ms", "snapshot_save_p99_ms"),
    *("slow_applies", "leader_changes", "db_growth_bytes", "db_quota_pct"),
)
SECRET_SHOWN = "***"  # an option's secret value (a password, a token, a key) as the summary shows it

# -- the load shape's record (etcd_users.features.shapes.record) --

SHAPE_REQUIRED_KEYS = ("started_at", "levels")

# -- a benchmark suite's record, DIR/suite.json (etcd_users.suite writes it, analysis.suite reads it) --

SUITE_JSON = "suite.json"
# Its "schema" key; a reader refuses any other version. The keys are documented in suites/README.md.
SUITE_SCHEMA_VERSION = 1

# The suite's "state": running until the last run ends (finished) or Ctrl-C / SIGTERM stops it (interrupted).
SUITE_RUNNING = "running"
SUITE_FINISHED = "finished"
SUITE_INTERRUPTED = "interrupted"

# A run's "status". Only a done run holds complete data (Locust's exit code 1 for failed requests included).
RUN_PENDING = "pending"  # not run yet
RUN_DONE = "done"
RUN_FAILED = "failed"  # its "error" says why
RUN_INTERRUPTED = "interrupted"  # stopped part-way; runs again when the suite is resumed
RUN_STATUSES = (RUN_PENDING, RUN_DONE, RUN_FAILED, RUN_INTERRUPTED)

# The keys the reader relies on: at the top, in each of "combinations", and in each of a combination's "runs".
SUITE_REQUIRED_KEYS = ("schema", "name", "axes", "axis_names", "combinations")
SUITE_COMBINATION_REQUIRED_KEYS = ("id", "label", "values", "runs")
SUITE_RUN_REQUIRED_KEYS = ("repeat", "prefix", "status")
