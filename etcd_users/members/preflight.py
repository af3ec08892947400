"""What the members are before the load starts: version, db size against quota, and the disk's WAL fsync P99.

etcd's ``check perf`` asks for a WAL fsync under 10 ms before a benchmark means anything: above it the disk, not
etcd, bounds every write. The fsync P99 is measured on each member from the difference of its
``etcd_disk_wal_fsync_duration_seconds`` histogram before and after a burst of small sequential puts under
``PREFIX__preflight__/`` (deleted right after); a db near its quota is told too, since writes fail once it is full
(and then the burst is not made: its own growth could fill it).
The report only informs: whatever fails in it is logged in one line and the run goes on.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.known_bugs import RESTARTING_ACTIONS, warn_known_bugs
from etcd_users.members.server_metrics import (
    DB_SIZE,
    FSYNC,
    QUOTA,
    Scrape,
    Scraper,
    bucket_delta,
    histogram_quantile,
    member_urls,
    one_line,
    ssl_context,
)
from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool, MemberStatus
from etcd_users.workload_model.keys import prefix_range_end

logger = logging.getLogger("etcd_users.monitoring.preflight")  # the name users' log filters know

BURST_PUTS = 200
BURST_SUBPREFIX = b"__preflight__/"
BURST_VALUE = b"p" * 64
# a slow disk must not hold up the start for long: 200 puts at 50 ms would take 10 s
BURST_SECONDS = 10.0
FSYNC_LIMIT_MS = 10.0  # etcdctl check perf's threshold
DB_QUOTA_WARNING = 0.8
SCRAPE_TIMEOUT = 5.0
# a follower may still be writing the burst's last entries when the leader has acknowledged them
SETTLE_SECONDS = 0.1


@dataclass(frozen=True)
class BurstResult:
    puts: int
    seconds: float
    error: str | None
    deleted: bool = True  # the burst's keys were deleted again


@dataclass(frozen=True)
class MemberReport:
    url: str
    version: str  # "" when unknown
    db_bytes: float | None
    quota_bytes: float | None
    fsync_p99_ms: float | None
    fsync_samples: int
    problems: tuple[str, ...] = ()  # why something is unknown
    is_leader: bool | None = None  # None when its Status did not answer


def format_bytes(size: float) -> str:
    """Binary units: 20480 -> 20.0 KiB, 2147483648 -> 2.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def report_lines(report: MemberReport) -> list[tuple[int, str]]:
    """(log level, message) of one member: one INFO line, then a WARNING per threshold crossed."""
    version = f"v{report.version}" if report.version else "version unknown"
    db, quota = report.db_bytes, report.quota_bytes
    if db is not None and quota:
        db_text = f"db {format_bytes(db)} of {format_bytes(quota)} quota ({100.0 * db / quota:.1f} %)"
    else:
        db_text = "db size unknown" if db is None else f"db {format_bytes(db)}"
    p99 = report.fsync_p99_ms
    fsync_text = "fsync P99 not measured" if p99 is None else f"fsync P99 {p99:.1f} ms"
    problems = f" ({'; '.join(report.problems)})" if report.problems else ""
    lines = [(logging.INFO, f"etcd {report.url}: {version}, {db_text}, {fsync_text}{problems}")]
    if p99 is not None and p99 > FSYNC_LIMIT_MS:
        lines.append(
            (
                logging.WARNING,
                f"etcd {report.url}: fsync P99 {p99:.1f} ms exceeds {FSYNC_LIMIT_MS:g} ms: the disk, not etcd, will "
                "bound the results (etcdctl check perf's threshold)",
            )
        )
    if db is not None and quota and db > DB_QUOTA_WARNING * quota:
        lines.append(
            (
                logging.WARNING,
                f"etcd {report.url}: db {format_bytes(db)} is {100.0 * db / quota:.1f} % of its {format_bytes(quota)} "
                "quota: writes fail with 'mvcc: database space exceeded' once it is full (compact and defragment "
                "it, or raise --quota-backend-bytes)",
            )
        )
    return lines


def member_report(
    url: str,
    status: MemberStatus | None,
    before: Scrape | str,
    after: Scrape | str,
    burst: BurstResult | None,
    skipped: str = "--etcd-skip-preflight",
) -> MemberReport:
    """One member's report from its Status, its scrapes before and after the burst (or why they failed).

    Without a burst, ``skipped`` says why.
    """
    problems = []
    if status is None or status.error:
        problems.append(f"Status: {status.error if status else 'not asked'}")
    problems.extend(f"metrics: {error}" for error in dict.fromkeys(s for s in (before, after) if isinstance(s, str)))
    found = before if isinstance(before, Scrape) else after  # the db as found, before the burst added to it
    values = found.values if isinstance(found, Scrape) else {}
    p99, samples = None, 0
    if burst is None:
        problems.append(skipped)
    elif isinstance(before, Scrape) and isinstance(after, Scrape):
        delta = bucket_delta(after.buckets(FSYNC), before.buckets(FSYNC)) or {}
        samples = int(delta.get(float("inf"), 0))
        quantile = histogram_quantile(0.99, delta.items()) if samples else None
        p99 = None if quantile is None else quantile * 1000.0
        if p99 is None:
            problems.append("no WAL fsync during the burst")
    if burst is not None and burst.error:
        problems.append(f"burst stopped after {burst.puts} puts: {burst.error}")
    return MemberReport(
        url=url,
        version=status.version if status is not None and not status.error else "",
        db_bytes=values.get(DB_SIZE),
        quota_bytes=values.get(QUOTA),
        fsync_p99_ms=p99,
        fsync_samples=samples,
        problems=tuple(problems),
        is_leader=status.member_id == status.leader_id if status is not None and not status.error else None,
    )


def _near_quota(scrape: Scrape) -> bool:
    db, quota = scrape.values.get(DB_SIZE), scrape.values.get(QUOTA)
    return db is not None and bool(quota) and db > DB_QUOTA_WARNING * quota


async def _status_and_burst(pool: EndpointPool, burst: bool) -> tuple[list[MemberStatus], BurstResult | None]:
    """Each member's Status; then, with ``burst``, sequential puts (one WAL fsync each) and their deletion."""
    settings = pool.settings
    statuses = await pool.status(settings.timeout)
    if not burst:
        return statuses, None
    prefix = settings.prefix + BURST_SUBPREFIX
    started = time.monotonic()
    puts, error = 0, None
    try:
        while puts < BURST_PUTS and time.monotonic() - started < BURST_SECONDS:
            connection = pool.next_connection()
            request = rpc_pb2.PutRequest(key=prefix + b"%04d" % puts, value=BURST_VALUE)
            await connection.kv.Put(request, timeout=settings.timeout, metadata=connection.metadata)
            puts += 1
    except (grpc.aio.AioRpcError, asyncio.TimeoutError) as failure:
        error = error_label(failure)
    seconds = time.monotonic() - started
    deleted = True
    try:
        connection = pool.next_connection()
        await connection.kv.DeleteRange(
            rpc_pb2.DeleteRangeRequest(key=prefix, range_end=prefix_range_end(prefix)),
            timeout=settings.timeout,
            metadata=connection.metadata,
        )
    except (grpc.aio.AioRpcError, asyncio.TimeoutError) as failure:
        deleted = False
        logger.warning(
            "pre-flight: could not delete the keys under %r: %s", prefix.decode(errors="replace"), error_label(failure)
        )
    return statuses, BurstResult(puts, seconds, error, deleted)


def measure(settings: EtcdSettings, with_probe: Callable) -> list[MemberReport]:
    """Scrape every member, run Status and the burst on a probe pool (``with_probe(settings, work)``), scrape again."""
    members = member_urls(settings)
    urls = [url for _, url in members]
    context = ssl_context(settings) if any(url.startswith("https:") for url in urls) else None
    scraper = Scraper(min(settings.timeout, SCRAPE_TIMEOUT), context)
    before = scraper.fetch_all(urls)
    skipped = "--etcd-skip-preflight" if settings.monitoring.skip_preflight else ""
    if not skipped and any(isinstance(scrape, Scrape) and _near_quota(scrape) for scrape in before):
        # the burst's own growth could fill it, and etcd then refuses every write until its alarm is disarmed
        skipped = f"no burst: a db is above {DB_QUOTA_WARNING * 100:g} % of its quota"
    elif not skipped and not any(isinstance(scrape, Scrape) for scrape in before):
        skipped = "no burst: no /metrics answered to measure it"
    statuses, result = with_probe(settings, functools.partial(_status_and_burst, burst=not skipped))
    if result is not None:
        log_burst(result, (settings.prefix + BURST_SUBPREFIX).decode(errors="replace"))
        gevent.sleep(SETTLE_SECONDS)
        after = scraper.fetch_all(urls)
    else:
        after = before
    by_url = {status.endpoint.url: status for status in statuses}
    return [
        member_report(member, by_url.get(member), first, last, result, skipped)
        for (member, _), first, last in zip(members, before, after, strict=True)
    ]


def burst_line(result: BurstResult, prefix: str) -> tuple[int, str]:
    """(log level, message) of the burst: what it wrote and deleted, or that it wrote nothing (no "0 puts …
    deleted" for a burst whose first put failed)."""
    if result.error and not result.puts:
        return (
            logging.WARNING,
            f"pre-flight: the write burst under {prefix!r} failed at its first put ({result.error}); WAL fsync P99 "
            "not measured",
        )
    stopped = f", then stopped ({result.error})" if result.error else ""
    deleted = "deleted" if result.deleted else "not deleted"
    return (
        logging.INFO if not result.error and result.deleted else logging.WARNING,
        f"pre-flight: {result.puts} puts of {len(BURST_VALUE)} bytes under {prefix!r} in {result.seconds:.2f}s"
        f"{stopped}, {deleted}; WAL fsync P99 per member:",
    )


def log_burst(result: BurstResult, prefix: str) -> None:
    level, message = burst_line(result, prefix)
    logger.log(level, "%s", message)


def report(settings: EtcdSettings, with_probe: Callable) -> list[MemberReport]:
    """Measure and log the report; never raises (an empty list when it could not be made)."""
    try:
        reports = measure(settings, with_probe)
    except Exception as error:  # the report informs; it never stops a run
        logger.warning("pre-flight report not made: %s", one_line(error))
        return []
    for member in reports:
        for level, message in report_lines(member):
            logger.log(level, "%s", message)
    restarts = any(disruption.action in RESTARTING_ACTIONS for disruption in settings.disruptions.schedule)
    warn_known_bugs([member.version for member in reports], restarts)
    return reports
