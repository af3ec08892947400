"""The members' db against its quota during a run, and etcd's NOSPACE alarm.

etcd keeps every revision until a compaction drops it, and refuses every write once its db reaches
``--quota-backend-bytes`` (``mvcc: database space exceeded``): it raises a NOSPACE alarm that stays until someone
compacts, defragments and disarms it, so every later run against it fails too. A long write run gets there without
a word from the client side. So, at each poll of the members' /metrics (``server_metrics.MetricsPoller``):

- each member whose db passes ``WARN_SHARE`` of its quota gets ONE warning with its growth over the last polls and the
  time left at that pace (``QuotaWatch``, pure);
- the cluster's alarms are asked (the Maintenance ``Alarm`` RPC, GET) on a connection of the master's own, and the
  run's failures are read for ``mvcc: database space exceeded``; the first NOSPACE seen is logged once per run at
  ERROR with the commands that recover (``SpaceWatch``), and kept in ``SpaceWatch.alarm`` for the web UI. The run goes
  on: the refused requests are counted as failures under etcd's label.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.members.preflight import format_bytes
from etcd_users.members.server_metrics import DB_SIZE, QUOTA, Scrape
from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import Probe

logger = logging.getLogger("etcd_users.monitoring.space")  # the name users' log filters know

WARN_SHARE = 0.8  # as the pre-flight report's threshold
FREE_SHARE = 0.2  # free pages worth a defragmentation: a fifth of the file or more
IN_USE = "etcd_mvcc_db_total_size_in_use_in_bytes"  # the db's pages that hold data; the rest is free for reuse
GROWTH_POLLS = 6  # the growth rate is taken over the last 5 intervals
NOSPACE_TEXT = "database space exceeded"  # in etcd's label 'etcdserver: mvcc: database space exceeded'
ALARM_NAMES = {rpc_pb2.NOSPACE: "NOSPACE", 2: "CORRUPT"}  # etcd3's protos predate CORRUPT


def growth_rate(history: Sequence[tuple[float, float]]) -> float | None:
    """Bytes per second from the first to the last (time, db bytes) pair; None without two distinct times."""
    if len(history) < 2 or history[-1][0] <= history[0][0]:
        return None
    (first_time, first_size), (last_time, last_size) = history[0], history[-1]
    return (last_size - first_size) / (last_time - first_time)


def seconds_left(db: float, quota: float, rate: float | None) -> float | None:
    """Seconds until ``db`` reaches ``quota`` at ``rate`` bytes/s (0 when already there); None when not growing."""
    if db >= quota:
        return 0.0
    if rate is None or rate <= 0:
        return None
    return (quota - db) / rate


def format_duration(seconds: float) -> str:
    """19 -> '19 s', 170 -> '3 min', 9000 -> '2.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def quota_warning(
    member: str, db: float, quota: float, rate: float | None, compacting: str = "", in_use: float | None = None
) -> str:
    """The warning of a member whose db passed ``WARN_SHARE`` of its quota, and the way out that fits: compaction when
    none runs; when one does (``compacting``: who, in a few words) or the file holds free pages (``in_use`` below the
    db), defragmentation, which gives those pages back; when live data fills the file, a larger quota."""
    head = f"etcd {member}: db {format_bytes(db)} is {100.0 * db / quota:.1f} % of its {format_bytes(quota)} quota"
    left = seconds_left(db, quota, rate)
    if left == 0.0:
        pace = "full"
    elif left is None:
        pace = "not growing now" if rate is not None else "growth unknown"
    else:
        pace = f"growing {format_bytes(rate)}/s: full in about {format_duration(left)}"
    free = None if in_use is None else max(0.0, db - in_use)
    if free is not None and free >= FREE_SHARE * db:
        who = f"{compacting}, and " if compacting else ""
        return (
            f"{head} ({format_bytes(free)} of it free pages), {pace}; {who}compaction frees pages inside the file but "
            f"never shrinks it: defragment (--etcd-disrupt defrag:all@TIME, or etcdctl defrag) or raise "
            "--quota-backend-bytes"
        )
    if compacting and free is not None:
        return (
            f"{head} ({format_bytes(in_use)} of it live data), {pace}; {compacting}, so defragmenting frees little: "
            "raise --quota-backend-bytes, or write fewer or smaller keys"
        )
    if compacting:
        return (
            f"{head}, {pace}; {compacting}, yet the file nears its quota: compaction frees pages inside it but never "
            "shrinks it: defragment (--etcd-disrupt defrag:all@TIME, or etcdctl defrag) or raise --quota-backend-bytes"
        )
    return f"{head}, {pace}; compact (--etcd-compact-interval) or raise --quota-backend-bytes"


def compaction_source(settings: EtcdSettings, local_compaction: str | None) -> str:
    """Who compacts the history during the run, in a few words ('' when nobody the tool knows of)."""
    interval = settings.monitoring.compact_interval
    if interval > 0:
        return f"--etcd-compact-interval {interval:g} compacts the history every {interval:g} s"
    if local_compaction:
        return f"the local etcd compacts itself ({local_compaction})"
    return ""


class QuotaWatch:
    """Each member's db size over the last polls; ``observe`` answers a warning once per member past the share."""

    def __init__(self, share: float = WARN_SHARE, polls: int = GROWTH_POLLS, compacting: str = "") -> None:
        self.share = share
        self._history: dict[str, deque[tuple[float, float]]] = {}
        self._polls = polls
        self.warned: set[str] = set()
        self.compacting = compacting  # who compacts the history during the run; '' when nobody the tool knows of

    def observe(
        self, member: str, timestamp: float, db: float | None, quota: float | None, in_use: float | None = None
    ) -> str | None:
        if db is None:
            return None
        history = self._history.setdefault(member, deque(maxlen=self._polls))
        history.append((timestamp, db))
        if member in self.warned or not quota or db <= self.share * quota:
            return None
        rate = growth_rate(history)
        if rate is None and db < quota:
            return None  # one poll says nothing of the pace: the next one will
        self.warned.add(member)
        return quota_warning(member, db, quota, rate, self.compacting, in_use)


@dataclass(frozen=True)
class Alarms:
    """What the Alarm RPC answered: (alarm name, member URL or id) pairs, and the revision of its header."""

    raised: tuple[tuple[str, str], ...]
    revision: int


def recovery_commands(endpoints: Sequence[str], revision: int | None, flags: str = "") -> list[str]:
    """The etcdctl commands that bring a cluster back from NOSPACE: compact the history, defragment every member (the
    file only shrinks then), disarm the alarm."""
    every = ",".join(endpoints)
    one = endpoints[0]
    at = str(revision) if revision else "REVISION"
    commands = [
        f"etcdctl{flags} --endpoints {one} compact {at}",
        f"etcdctl{flags} --endpoints {every} defrag",
        f"etcdctl{flags} --endpoints {one} alarm disarm",
    ]
    if not revision:
        commands[0] += "   # REVISION: the header's revision of etcdctl get / -w json"
    return commands


def alarm_message(members: Sequence[str], endpoints: Sequence[str], revision: int | None, flags: str = "") -> str:
    """The ERROR logged once per run: what happened, what it does to the run, and how to recover."""
    where = f"on {', '.join(members)}" if members else "(writes fail with it)"
    commands = "\n".join(f"    {command}" for command in recovery_commands(endpoints, revision, flags))
    return (
        f"etcd NOSPACE alarm {where}: the db reached its quota and etcd refuses every write with 'mvcc: database space "
        "exceeded' until the alarm is disarmed, in this run and the next; the run goes on, counting them as failures. "
        f"To recover, compact, defragment every member and disarm:\n{commands}"
    )


def alarm_summary(members: Sequence[str]) -> str:
    """The short text the web UI shows."""
    where = f" on {', '.join(members)}" if members else ""
    return (
        f"NOSPACE alarm{where}: etcd refuses every write (mvcc: database space exceeded) until compacted, defragmented "
        "and disarmed (etcdctl compact, defrag, alarm disarm)"
    )


async def _alarms(pool: EndpointPool) -> Alarms:
    connection = pool.next_connection()
    response = await connection.maintenance.Alarm(
        rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET),
        timeout=min(pool.settings.timeout, 5.0),
        metadata=connection.metadata,
    )
    if not response.alarms:
        return Alarms((), response.header.revision)
    # name the members by the URLs given when they are among them
    statuses = await pool.status(min(pool.settings.timeout, 5.0))
    urls = {status.member_id: status.endpoint.url for status in statuses if status.member_id is not None}
    raised = tuple(
        (ALARM_NAMES.get(alarm.alarm, f"alarm {alarm.alarm}"), urls.get(alarm.memberID, f"member {alarm.memberID:x}"))
        for alarm in response.alarms
    )
    return Alarms(raised, response.header.revision)


class SpaceWatch:
    """One run's watch of the members' space, fed by the metrics poller after each poll."""

    def __init__(self, settings: EtcdSettings, environment=None, local_compaction: str | None = None) -> None:
        self.settings = settings
        self.environment = environment
        self.quota = QuotaWatch(compacting=compaction_source(settings, local_compaction))
        self.probe = Probe(settings)
        self.alarm: str | None = None  # a short text while a NOSPACE alarm is known, for the web UI
        self.alarm_logged = False
        self._problems: set[str] = set()

    def after_poll(self, timestamp: float, results: Sequence[tuple[str, Scrape | str]]) -> None:
        """The scrapes of one poll (a Scrape, or why it failed, per member), then the alarms and the failures."""
        for member, scrape in results:
            if isinstance(scrape, Scrape):
                values = scrape.values
                warning = self.quota.observe(
                    member, timestamp, values.get(DB_SIZE), values.get(QUOTA), values.get(IN_USE)
                )
                if warning:
                    logger.warning("%s", warning)
        self.check_alarms()
        self.check_failures()

    def check_alarms(self) -> None:
        try:
            alarms = self.probe.run(_alarms)
        except (grpc.aio.AioRpcError, asyncio.TimeoutError) as error:
            self._problem(error_label(error))
            return
        except EndpointError as error:
            self._problem(str(error))
            return
        except Exception as error:  # whatever it is, the watch never stops a run
            self._problem(f"{type(error).__name__}: {error}")
            return
        nospace = [member for name, member in alarms.raised if name == "NOSPACE"]
        for name, member in alarms.raised:
            if name != "NOSPACE" and f"{name} {member}" not in self._problems:
                self._problems.add(f"{name} {member}")
                logger.error("etcd %s alarm on %s: see the member's log; the run goes on", name, member)
        if nospace:
            self._nospace(nospace, alarms.revision)
        elif self.alarm is not None:
            self.alarm = None
            logger.info("etcd: the NOSPACE alarm is disarmed; writes are accepted again")

    def check_failures(self) -> None:
        """Requests refused for space: the alarm as the users see it, when the Alarm RPC could not tell."""
        stats = getattr(self.environment, "stats", None)
        if stats is None or self.alarm_logged:
            return
        if any(NOSPACE_TEXT in str(error.error) for error in list(stats.errors.values())):
            self._nospace([], None)

    def _nospace(self, members: Sequence[str], revision: int | None) -> None:
        self.alarm = alarm_summary(members)
        if not self.alarm_logged:
            self.alarm_logged = True
            endpoints = [endpoint.url for endpoint in self.settings.endpoints]
            logger.error("%s", alarm_message(members, endpoints, revision, self._etcdctl_flags()))

    def _etcdctl_flags(self) -> str:
        """What etcdctl needs besides the endpoints to reach these members (placeholders: no path, no password)."""
        flags = ""
        credentials = self.settings.credentials
        if credentials.root_certificates:
            flags += " --cacert CA.pem"
        if credentials.certificate_chain:
            flags += " --cert CLIENT.pem --key CLIENT-KEY.pem"
        if credentials.user:
            flags += f" --user {credentials.user}"
        return flags

    def _problem(self, kind: str) -> None:
        if kind not in self._problems:
            self._problems.add(kind)
            logger.warning("etcd alarms: could not ask the members (%s); the run goes on", kind)

    def close(self) -> None:
        self.probe.close()
