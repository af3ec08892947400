"""The members' own view of a run: each member's Prometheus /metrics, polled into ``PREFIX_etcd_metrics.csv``.

The client side says how long requests took; the server side says why: leader changes, proposals that pile up,
the WAL fsync and backend commit latency of the disk, the db growing towards its quota, memory and CPU. The master
(or the single process) polls every member every ``--etcd-metrics-interval`` seconds in a greenlet, over urllib on
gevent's patched sockets, and with ``--csv`` appends one row per member per poll (see ``COLUMNS``). A member that does
not answer gets a row with ``Error`` set; the run goes on. Each poll also feeds the run's watch of the db against its
quota and of etcd's alarms (``monitoring.space``), with or without ``--csv``.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import csv
import logging
import math
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import gevent

from etcd_users.exposition import parse_metrics
from etcd_users.files import ETCD_METRICS_COLUMNS, SUFFIXES
from etcd_users.members.buckets import (  # noqa: F401  (the pre-flight report takes them from here)
    Buckets,
    bucket_delta,
    format_buckets,
    histogram_quantile,
    interval_p99_ms,
)
from etcd_users.settings import EtcdSettings

logger = logging.getLogger("etcd_users.monitoring.server_metrics")  # the name users' log filters know

CSV_SUFFIX = SUFFIXES["etcd_metrics"]
FSYNC = "etcd_disk_wal_fsync_duration_seconds"
BACKEND_COMMIT = "etcd_disk_backend_commit_duration_seconds"
PEER_RTT = "etcd_network_peer_round_trip_time_seconds"  # one histogram per peer (label To): none on one member
SNAPSHOT_SAVE = "etcd_debugging_snap_save_total_duration_seconds"
GRPC_HANDLED = "grpc_server_handled_total"
DB_SIZE = "etcd_mvcc_db_total_size_in_bytes"
QUOTA = "etcd_server_quota_backend_bytes"

# CSV column -> the plain (counter or gauge) metric it shows, as named by etcd 3.5
GAUGE_COLUMNS = {
    "IsLeader": "etcd_server_is_leader",
    "HasLeader": "etcd_server_has_leader",
    "LeaderChanges": "etcd_server_leader_changes_seen_total",
    "ProposalsCommitted": "etcd_server_proposals_committed_total",
    "ProposalsApplied": "etcd_server_proposals_applied_total",
    "ProposalsPending": "etcd_server_proposals_pending",
    "ProposalsFailed": "etcd_server_proposals_failed_total",
    "DbSizeBytes": DB_SIZE,
    "DbSizeInUseBytes": "etcd_mvcc_db_total_size_in_use_in_bytes",
    "QuotaBytes": QUOTA,
    "RssBytes": "process_resident_memory_bytes",
    "CpuSeconds": "process_cpu_seconds_total",
    "SlowApplies": "etcd_server_slow_apply_total",
    "OpenFds": "process_open_fds",  # the member's sockets and files: its client connections, give or take a constant
}
DEBUGGING_COLUMNS = {
    "Keys": "etcd_debugging_mvcc_keys_total",
    "WatchStreams": "etcd_debugging_mvcc_watch_stream_total",
    "Watchers": "etcd_debugging_mvcc_watcher_total",
}
COLUMNS = ETCD_METRICS_COLUMNS
_PLAIN_METRICS = frozenset(GAUGE_COLUMNS.values()) | frozenset(DEBUGGING_COLUMNS.values())
_HISTOGRAMS = (FSYNC + "_bucket", BACKEND_COMMIT + "_bucket", SNAPSHOT_SAVE + "_bucket")
_PEER_HISTOGRAM = PEER_RTT + "_bucket"
# Only these lines are parsed: a member's page has ~1500 lines (~150 KB), most of them unused here.
_WANTED_PREFIXES = tuple(sorted(_PLAIN_METRICS)) + _HISTOGRAMS + (_PEER_HISTOGRAM, GRPC_HANDLED)
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


@dataclass
class Scrape:
    """What one member's /metrics says, reduced to what the CSV and the pre-flight report use."""

    values: dict[str, float] = field(default_factory=dict)  # plain metrics by name, summed over labels
    histograms: dict[str, Buckets] = field(default_factory=dict)  # by name, without the _bucket suffix
    grpc: dict[tuple[str, str], float] = field(default_factory=dict)  # (method, code) -> handled calls
    peers: dict[str, Buckets] = field(default_factory=dict)  # the peer round-trip time's buckets by peer ID

    def buckets(self, name: str) -> Buckets:
        return self.histograms.get(name, {})


def parse_scrape(text: str) -> Scrape:
    """Reduce a /metrics page to a ``Scrape`` (raises ValueError on a malformed line)."""
    lines = [
        line
        for line in text.splitlines()
        # a zero counter of grpc_server_handled_total (most of its ~700 lines) adds nothing
        if line.startswith(_WANTED_PREFIXES) and not (line.startswith(GRPC_HANDLED) and line.endswith(" 0"))
    ]
    scrape = Scrape()
    for sample in parse_metrics("\n".join(lines)):
        if sample.name in _PLAIN_METRICS:
            scrape.values[sample.name] = scrape.values.get(sample.name, 0.0) + sample.value
        elif sample.name in _HISTOGRAMS:
            buckets = scrape.histograms.setdefault(sample.name.removesuffix("_bucket"), {})
            bound = float(sample.labels.get("le", "nan"))
            if not math.isnan(bound):
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
        elif sample.name == _PEER_HISTOGRAM:
            buckets = scrape.peers.setdefault(sample.labels.get("To", ""), {})
            bound = float(sample.labels.get("le", "nan"))
            if not math.isnan(bound):
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
        elif sample.name == GRPC_HANDLED and sample.value:
            key = (sample.labels.get("grpc_method", ""), sample.labels.get("grpc_code", ""))
            scrape.grpc[key] = scrape.grpc.get(key, 0.0) + sample.value
    return scrape


def format_grpc(counts: dict[tuple[str, str], float]) -> str:
    """``method:code=count;…`` sorted, calls so far (etcd's Watch of etcdserverpb and of grpc.health are summed)."""
    return ";".join(f"{method}:{code}={count:.0f}" for (method, code), count in sorted(counts.items()))


def _number(value: float | None) -> str | int | float:
    if value is None:
        return ""
    return int(value) if float(value).is_integer() else round(value, 3)


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def worst_peer_p99_ms(after: dict[str, Buckets], before: dict[str, Buckets] | None) -> float | None:
    """The highest P99 in ms of the peers' round-trip times between two scrapes; None without peers or samples."""
    values = [interval_p99_ms(buckets, (before or {}).get(peer)) for peer, buckets in after.items()]
    return max((value for value in values if value is not None), default=None)


def row_dict(timestamp: float, member: str, scrape: Scrape, previous: Scrape | None) -> dict[str, str | int | float]:
    """One CSV row by column from a scrape and the member's previous one (for the interval's P99s)."""
    previous_buckets = previous.histograms if previous is not None else {}
    fsync, commit, snapshot = (
        interval_p99_ms(scrape.buckets(name), previous_buckets.get(name))
        for name in (FSYNC, BACKEND_COMMIT, SNAPSHOT_SAVE)
    )
    peer_rtt = worst_peer_p99_ms(scrape.peers, previous.peers if previous is not None else None)
    return {
        "Timestamp": f"{timestamp:.3f}",
        "Member": member,
        **{column: _number(scrape.values.get(name)) for column, name in {**GAUGE_COLUMNS, **DEBUGGING_COLUMNS}.items()},
        "FsyncP99Ms": _ms(fsync),
        "BackendCommitP99Ms": _ms(commit),
        "GrpcRequests": format_grpc(scrape.grpc),
        "Error": "",
        "PeerRttP99Ms": _ms(peer_rtt),
        "SnapshotSaveP99Ms": _ms(snapshot),
        "FsyncBuckets": format_buckets(scrape.buckets(FSYNC)),
        "BackendCommitBuckets": format_buckets(scrape.buckets(BACKEND_COMMIT)),
        "PeerRttBuckets": ";".join(format_buckets(buckets, peer) for peer, buckets in sorted(scrape.peers.items())),
        "SnapshotSaveBuckets": format_buckets(scrape.buckets(SNAPSHOT_SAVE)),
    }


def row_fields(timestamp: float, member: str, scrape: Scrape, previous: Scrape | None) -> list:
    """One CSV row (in ``COLUMNS`` order)."""
    row = row_dict(timestamp, member, scrape, previous)
    return [row[column] for column in COLUMNS]


def error_dict(timestamp: float, member: str, error: str) -> dict[str, str]:
    row = {"Timestamp": f"{timestamp:.3f}", "Member": member, "Error": error}
    return {column: row.get(column, "") for column in COLUMNS}


def error_fields(timestamp: float, member: str, error: str) -> list:
    return list(error_dict(timestamp, member, error).values())


def describe_error(error: BaseException, timeout: float) -> str:
    """Why a scrape failed, in one line."""
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g}s"
    return one_line(reason) if isinstance(reason, BaseException) else str(reason)


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def member_urls(settings: EtcdSettings) -> list[tuple[str, str]]:
    """(endpoint URL, /metrics URL) of each member, from ``--etcd-metrics-urls`` or the client URLs."""
    urls = settings.monitoring.metrics_urls or tuple(f"{endpoint.url}/metrics" for endpoint in settings.endpoints)
    return [(endpoint.url, url) for endpoint, url in zip(settings.endpoints, urls, strict=True)]


def ssl_context(settings: EtcdSettings) -> ssl.SSLContext:
    """The client TLS of ``--etcd-cacert/--etcd-cert/--etcd-key``, for https metrics URLs."""
    context = ssl.create_default_context(cafile=settings.cacert or None)
    if settings.cert:
        context.load_cert_chain(settings.cert, settings.key or None)
    return context


class Scraper:
    """GETs and parses /metrics pages; loopback URLs never go through an http_proxy from the environment."""

    def __init__(self, timeout: float, context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        handlers: list = [urllib.request.HTTPSHandler(context=context)] if context is not None else []
        self._direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), *handlers)
        self._proxied = urllib.request.build_opener(*handlers)

    def fetch(self, url: str) -> Scrape:
        opener = self._direct if urllib.parse.urlsplit(url).hostname in _LOOPBACK_HOSTS else self._proxied
        request = urllib.request.Request(url, headers={"Accept": "text/plain; version=0.0.4"})
        with opener.open(request, timeout=self.timeout) as response:
            charset = response.headers.get_content_charset() or "utf-8"
            return parse_scrape(response.read().decode(charset, "replace"))

    def answer(self, url: str) -> Scrape | str:
        """A scrape of ``url``, or why it failed in one line."""
        try:
            return self.fetch(url)
        except Exception as error:  # whatever the member sent back, a row with the error and the run goes on
            return describe_error(error, self.timeout)

    def fetch_all(self, urls: Sequence[str]) -> list[Scrape | str]:
        """Every URL at once; a scrape, or why it failed in one line, for each."""
        jobs = [gevent.spawn(self.answer, url) for url in urls]
        gevent.joinall(jobs)
        return [job.value for job in jobs]


class MetricsPoller:
    """Polls every member at a fixed period, appends their rows to the CSV file (when there is one) and hands each
    poll to ``watch`` (``watch.after_poll(timestamp, [(member, Scrape or error), …])``, ``watch.close()`` at stop)."""

    def __init__(
        self,
        members: Sequence[tuple[str, str]],
        interval: float,
        scraper: Scraper,
        path: str | None,
        watch=None,
        members_now: Callable[[], Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        """``members_now``: the members as the cluster has them at each poll (the local etcd, which an add-learner
        grows): one it adds is polled from then on."""
        self.members = list(members)
        self.members_now = members_now
        self.interval = interval
        self.scraper = scraper
        self.path = path
        self.watch = watch
        self._stopped = False
        self._file: TextIO | None = None
        if path is not None:
            self._file = open(path, "w", newline="")
            self._writer = csv.writer(self._file)
            self._writer.writerow(COLUMNS)
            self._file.flush()
        # every row of the run as written (also without a file): the members' figures and gates read them at the end
        self.rows: list[dict] = []
        self._previous: dict[str, Scrape] = {}
        self._failing: set[str] = set()
        self._greenlet: gevent.Greenlet | None = None

    def poll(self) -> None:
        """One row per member, all with the same timestamp (when the poll began); then the watch's turn."""
        timestamp = time.time()
        if self.members_now is not None:
            try:
                now = self.members_now()
            except Exception:  # a cluster stopping says nothing more: the members polled so far
                now = ()
            for member in now:
                if member not in self.members:
                    self.members.append(member)
                    logger.info("etcd metrics: polling %s too, a member added during the run", member[0])
        results = self.scraper.fetch_all([url for _, url in self.members])
        if self._stopped:
            return
        for (member, _), result in zip(self.members, results, strict=True):
            if isinstance(result, str):
                self._write(error_dict(timestamp, member, result))
                if member not in self._failing:
                    logger.warning("etcd metrics: %s did not answer (%s); the run goes on", member, result)
                    self._failing.add(member)
                continue  # the next P99 covers the time since the last scrape that worked
            self._write(row_dict(timestamp, member, result, self._previous.get(member)))
            self._previous[member] = result
            if member in self._failing:
                logger.info("etcd metrics: %s answers again", member)
                self._failing.discard(member)
        if self._file is not None:
            self._file.flush()
        if self.watch is not None:
            members = [member for member, _ in self.members]
            self.watch.after_poll(timestamp, list(zip(members, results, strict=True)))

    def _write(self, row: dict) -> None:
        self.rows.append(row)
        if self._file is not None:
            self._writer.writerow([row[column] for column in COLUMNS])

    def _run(self) -> None:
        started = time.monotonic()
        periods = 0
        while True:
            try:
                self.poll()
            except Exception as error:  # a failing poll never stops a run
                logger.warning("etcd metrics: poll failed: %s", one_line(error))
            # a fixed schedule; polls missed while one was slow are skipped, not made up
            periods = max(periods + 1, int((time.monotonic() - started) / self.interval) + 1)
            gevent.sleep(max(0.0, started + periods * self.interval - time.monotonic()))

    def start(self) -> None:
        """Poll at once (the state at the start), then every interval."""
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop polling, take a last row per member (the state at the end) and close the file."""
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=self.scraper.timeout + 1.0)
            self._greenlet = None
            try:
                self.poll()
            except Exception as error:
                logger.warning("etcd metrics: last poll failed: %s", one_line(error))
        self._stopped = True
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.watch is not None:
            self.watch.close()


def start_polling(environment, settings: EtcdSettings, watch=None, members_now=None) -> MetricsPoller | None:
    """On the master or the single process at test start: a started poller whenever ``--etcd-metrics-interval`` asks
    for one (the caller stops it), writing ``PREFIX_etcd_metrics.csv`` with ``--csv PREFIX``; else None.
    ``members_now``: the local etcd's members at each poll (``MetricsPoller``), unless ``--etcd-metrics-urls``."""
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if settings.monitoring.metrics_interval <= 0 or not settings.endpoints:
        return None
    members = member_urls(settings)
    try:
        context = ssl_context(settings) if any(url.startswith("https:") for _, url in members) else None
        # short: a member that hangs must not hold up the others' rows for long
        scraper = Scraper(min(settings.timeout, max(1.0, settings.monitoring.metrics_interval)), context)
        path = prefix + CSV_SUFFIX if prefix else None
        grows = None if settings.monitoring.metrics_urls else members_now
        poller = MetricsPoller(members, settings.monitoring.metrics_interval, scraper, path, watch, grows)
    except (OSError, ssl.SSLError) as error:
        logger.error("locust-etcd: no server metrics: %s", one_line(error))
        return None
    poller.start()
    logger.info(
        "polling /metrics of %d member%s every %gs %s",
        len(members),
        "s" * (len(members) > 1),
        settings.monitoring.metrics_interval,
        f"into {poller.path}" if poller.path else "(db size against quota)",
    )
    return poller
