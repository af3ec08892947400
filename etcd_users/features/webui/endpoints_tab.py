"""The web UI's "etcd endpoints" tab: one row per member as the run follows the membership, with its role, whether it
receives requests, and the leader changes it has seen since the run started.

- the members: the endpoints given; with a schedule that changes the membership (``--etcd-disrupt`` add-learner,
  promote, remove), as etcd lists them every second (``members.member_list``), followed as the pools follow them
  (``transport.membership.listed``): a learner added appears, a member removed goes;
- the role: from each member's /metrics (``etcd_server_is_leader``, ``etcd_server_has_leader``), each member looked
  up on its own (``members.member_lookups``): one that does not answer is said so once its look-up has waited
  ``ANSWER_DUE_S``, or as soon as this process's users' pool left it out, without holding up the others' rows;
- whether it receives requests: this process's users' pool says (the members it rotates over, the leader, those left
  out until they answer); a master, whose users are its workers', says what those pools do: a learner and a member
  that does not answer take none, and ``--etcd-target leader`` sends every request to the leader;
- leader changes since the run started: ``etcd_server_leader_changes_seen_total`` counts the member's first election
  too (a fresh cluster would show 1), so each member's first count of the run is its baseline; a count below it, the
  member's own restart, starts a new one.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from etcd_users.members import server_metrics
from etcd_users.members.member_list import MemberListWatch
from etcd_users.members.member_lookups import ANSWER_DUE_S, Lookup, MemberLookups
from etcd_users.settings import EtcdSettings
from etcd_users.transport import membership
from etcd_users.transport.membership import Listed

LEADER_CHANGES = "etcd_server_leader_changes_seen_total"  # counts the member's first election too
LOOKUP_TIMEOUT_S = 2.0  # per /metrics page, each member's own
NOT_ANSWERING = "not answering"
LEFT_OUT = "no (left out until it answers)"


class PoolView(NamedTuple):
    """Where this process's users' pool sends requests now (member URLs)."""

    rotation: frozenset[str]  # the members that take load (all that answer, with round-robin)
    leader: str | None  # the leader the pool knows; None while the members elect one
    left_out: Mapping[str, float]  # the members left out as silent, with when (time.time())


def pool_view(pool) -> PoolView | None:
    """What ``pool`` (an ``EndpointPool``, None without one) does now; read on the gevent thread, from attributes the
    loop thread replaces whole."""
    if pool is None:
        return None
    now, clock = time.time(), time.perf_counter()
    dead, since = pool.dead, pool.dead_since
    left_out = {endpoint.url: now - (clock - since.get(endpoint, clock)) for endpoint in dead}
    leader = pool.leader
    return PoolView(frozenset(e.url for e in pool.endpoints if e not in dead), leader and leader.url, left_out)


def note_leader_changes(baselines: dict[str, float], url: str, scrape: server_metrics.Scrape) -> None:
    """Take ``url``'s first count as its baseline (in place); a count below it, the member's own restart, starts a new
    one."""
    count = scrape.values.get(LEADER_CHANGES, 0.0)
    if url not in baselines or count < baselines[url]:
        baselines[url] = count


def role_of(member: Listed, lookup: Lookup, now: float, left_out_at: float | None = None) -> str:
    """The member's role from its look-ups; ``left_out_at``: when the users' pool left it out as silent, if it did."""
    answer, waited = lookup.answer, lookup.waiting(now)
    if isinstance(answer, str):
        return f"{NOT_ANSWERING} ({answer})"
    if waited >= ANSWER_DUE_S:
        return f"{NOT_ANSWERING} (no answer for {waited:.1f}s)"
    if left_out_at is not None and lookup.answered_at <= left_out_at:  # no answer here since the pool's verdict
        return f"{NOT_ANSWERING} (its Status went unanswered)"
    if answer is None:
        return "checking"
    if member.learner:
        return "learner"
    if answer.values.get("etcd_server_is_leader"):
        return "leader"
    if answer.values.get("etcd_server_has_leader", 1) == 0:
        return "no leader"
    return "follower"


def load_of(settings: EtcdSettings, member: Listed, role: str, pool: PoolView | None) -> str:
    """Whether the member receives requests: the users' pool's choice when this process has one, else what the pools
    would do from its role."""
    if member.learner:
        return "no (learner)"
    if pool is not None:
        if member.url in pool.left_out:
            return LEFT_OUT
        if settings.target == "leader":
            return "yes" if member.url == pool.leader else "no"
        return "yes (rotation)" if member.url in pool.rotation else "no"
    if role.startswith(NOT_ANSWERING):
        return "no (does not answer)"
    if settings.target == "leader":
        return "yes" if role == "leader" else "no"
    return "yes (rotation)"


def endpoint_rows(
    settings: EtcdSettings,
    members: list[Listed],
    lookups: Mapping[str, Lookup],
    now: float,
    baselines: Mapping[str, float] | None = None,
    pool: PoolView | None = None,
) -> list[dict[str, Any]]:
    """One row per member: its role, where requests go, how long ago it answered, and the leader changes since its
    ``baselines`` count (the run's start; none yet: blank)."""
    baselines = baselines or {}
    rows = []
    for member in members:
        lookup = lookups.get(member.url) or Lookup()
        role = role_of(member, lookup, now, pool.left_out.get(member.url) if pool is not None else None)
        changes: int | str = ""
        answer = lookup.answer
        if isinstance(answer, server_metrics.Scrape) and member.url in baselines and not role.startswith(NOT_ANSWERING):
            changes = int(max(0.0, answer.values.get(LEADER_CHANGES, 0.0) - baselines[member.url]))
        rows.append(
            {
                "name": member.url,
                "role": role,
                "load": load_of(settings, member, role, pool),
                "conns": settings.conns,
                "leaderchanges": changes,
                "checked": f"{max(0.0, now - lookup.answered_at):.0f}s ago" if lookup.answered_at else "",
            }
        )
    return rows


class EndpointsTab:
    """The tab's rows for the current run's settings: its members followed and looked up in the background while the
    tab is read; ``users_pool()``: this process's users' pool, None without one (a master, or before any user)."""

    def __init__(
        self,
        users_pool: Callable[[], Any] = lambda: None,
        local_members: Callable[[], list[tuple[str, str]]] | None = None,
    ) -> None:
        self.users_pool = users_pool
        # the local etcd's members (client URL, /metrics URL) as they are now: where an added member's /metrics is
        self.local_members = local_members
        self._settings: EtcdSettings | None = None
        self._lookups: MemberLookups | None = None
        self._member_list: MemberListWatch | None = None
        self._baselines: dict[str, float] = {}  # per member URL, its leader changes when the run started
        self._counting_from = 0.0  # time.time() from which a look-up's count may be a baseline
        self._rows: list[dict[str, Any]] = []
        self._quit = False

    def rows(self, settings: EtcdSettings) -> list[dict[str, Any]]:
        if self._quit:  # the process's connections are closing: the last rows, no look-up started again
            return self._rows
        if settings != self._settings:
            self._use(settings)
        listed = self._member_list.latest() if self._member_list is not None else None
        members = membership.listed(list(settings.endpoints), listed, settings.disruptions.adds_members)
        metrics_urls = self._metrics_urls(settings, members)
        lookups = self._lookups.follow({member.url: metrics_urls[member.url] for member in members})
        pool = pool_view(self.users_pool())
        self._rows = endpoint_rows(settings, members, lookups, time.time(), self._baselines, pool)
        return self._rows

    def on_test_start(self, settings: EtcdSettings) -> None:
        """A run starts: leader changes count from the first look-ups that begin now, which begin at once."""
        self._baselines = {}
        self._counting_from = time.time()
        self.rows(settings)

    def quit(self) -> None:
        """Stop for good (at quit, before the process's connections close): a page read later shows the last rows."""
        self._quit = True
        self.close()

    def close(self) -> None:
        if self._lookups is not None:
            self._lookups.close()
        if self._member_list is not None:
            self._member_list.close()
        self._lookups = self._member_list = self._settings = None

    def _use(self, settings: EtcdSettings) -> None:
        """Other members, or the same with other options: looked up afresh, leader changes counted from here."""
        self.close()
        self._settings = settings
        self._baselines = {}
        members = server_metrics.member_urls(settings)
        context = None
        try:
            if any(url.startswith("https:") for _, url in members):
                context = server_metrics.ssl_context(settings)
        except (OSError, ssl.SSLError):
            pass  # each look-up says why it fails
        scraper = server_metrics.Scraper(min(settings.timeout, LOOKUP_TIMEOUT_S), context)
        self._lookups = MemberLookups(scraper, self._on_answer)
        if settings.disruptions.changes_membership:
            self._member_list = MemberListWatch(settings)

    def _on_answer(self, url: str, scrape: server_metrics.Scrape, asked_at: float) -> None:
        if asked_at >= self._counting_from:
            note_leader_changes(self._baselines, url, scrape)

    def _metrics_urls(self, settings: EtcdSettings, members: list[Listed]) -> dict[str, str]:
        """Each member's /metrics: ``--etcd-metrics-urls``'s or the local etcd's, else on its client URL."""
        known = dict(server_metrics.member_urls(settings))
        if self.local_members is not None and any(member.url not in known for member in members):
            known = {**dict(self.local_members()), **known}
        return {member.url: known.get(member.url, f"{member.url}/metrics") for member in members}
