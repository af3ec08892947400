"""Each member's /metrics looked up on its own, for the web UI's endpoints tab: a greenlet per member, each with the
scraper's timeout, looking again every ``INTERVAL_S`` for as long as someone reads the table (``IDLE_S``).

A member that stops answering (frozen, cut off) accepts the connection and sends nothing: a look-up of all members
together waited for it, and every row with it. Here the others go on, and a look-up that has waited ``ANSWER_DUE_S``
already says the member does not answer (``Lookup.waiting``), long before its timeout: a page of /metrics takes
milliseconds.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import gevent

from etcd_users.members.server_metrics import Scrape, Scraper

INTERVAL_S = 1.0
ANSWER_DUE_S = 1.0
IDLE_S = 10.0  # nobody has read the table for this long: the look-ups stop until the next read


@dataclass
class Lookup:
    """One member's look-ups so far; times are ``time.time()``."""

    answer: Scrape | str | None = None  # the last: its scrape, or why it failed in one line; None: none yet
    answered_at: float = 0.0  # when the last answer (or failure) came
    asked_at: float | None = None  # when the look-up now under way began; None: none is

    def waiting(self, now: float) -> float:
        """How long the look-up under way has waited at ``now`` (0 without one)."""
        return 0.0 if self.asked_at is None else max(0.0, now - self.asked_at)


def _no_answer_hook(url: str, scrape: Scrape, asked_at: float) -> None:
    """``on_answer`` by default: nothing."""


class MemberLookups:
    """The look-ups of the members ``follow`` names; ``on_answer(url, scrape, asked_at)`` hears each scrape."""

    def __init__(self, scraper: Scraper, on_answer: Callable[[str, Scrape, float], None] = _no_answer_hook) -> None:
        self.scraper = scraper
        self.on_answer = on_answer
        self.lookups: dict[str, Lookup] = {}
        self._metrics_urls: dict[str, str] = {}
        self._greenlets: dict[str, gevent.Greenlet] = {}
        self._read_at = time.monotonic()
        self._closed = False

    def follow(self, metrics_urls: Mapping[str, str]) -> dict[str, Lookup]:
        """Look up these members (member URL -> its /metrics URL), and no other; each one's look-ups so far."""
        self._read_at = time.monotonic()
        self._metrics_urls = dict(metrics_urls)
        for url in self._metrics_urls:
            lookup = self.lookups.setdefault(url, Lookup())
            job = self._greenlets.get(url)
            if not self._closed and (job is None or job.dead):
                lookup.asked_at = None  # a greenlet killed while it waited left its look-up behind
                self._greenlets[url] = gevent.spawn(self._look_up, url)
        for url in [url for url in self.lookups if url not in self._metrics_urls]:
            del self.lookups[url]  # a member that left the table: its figures go with it
        return {url: self.lookups[url] for url in self._metrics_urls}

    def _look_up(self, url: str) -> None:
        while not self._closed and url in self._metrics_urls and time.monotonic() - self._read_at < IDLE_S:
            started = time.monotonic()
            lookup = self.lookups.setdefault(url, Lookup())  # the member's, should it have left and come back
            asked_at = lookup.asked_at = time.time()
            answer = self.scraper.answer(self._metrics_urls[url])
            lookup.answer, lookup.answered_at, lookup.asked_at = answer, time.time(), None
            if isinstance(answer, Scrape):
                self.on_answer(url, answer, asked_at)
            gevent.sleep(max(0.0, started + INTERVAL_S - time.monotonic()))

    def close(self) -> None:
        self._closed = True
        gevent.killall(list(self._greenlets.values()), block=False)
        self._greenlets = {}
