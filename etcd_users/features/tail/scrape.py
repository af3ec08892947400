"""Every member's /metrics once a second during a run, reduced to the signals that explain a slow second.

On the master (or the single process), in a greenlet of its own on a fixed schedule, every member at once. The page
is fetched whole (etcd serves no subset) and only the few dozen lines the signals need are parsed
(``member_signals.WANTED``). A member that does not answer within the second is itself an event
(``member-unanswering``); its next answer is compared with its last one, whatever time passed. Runs against more than
``MAX_MEMBERS`` members are not scraped: the client's side of the timeline goes on.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence

import gevent

from etcd_users.features.tail.events import Event, clock
from etcd_users.features.tail.member_signals import Reading, Sample, between, read_page
from etcd_users.members.server_metrics import describe_error, member_urls, ssl_context

logger = logging.getLogger(__name__)

PERIOD_S = 1.0
TIMEOUT_S = 0.9  # a member that hangs must not hold up the next second's scrape
MAX_MEMBERS = 5
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def member_name(url: str) -> str:
    """host:port of a client URL: a member as the lines name it."""
    return urllib.parse.urlsplit(url).netloc or url


class PageFetcher:
    """GETs a /metrics page as text; loopback URLs never go through an http_proxy from the environment."""

    def __init__(self, timeout: float, context=None) -> None:
        self.timeout = timeout
        handlers: list = [urllib.request.HTTPSHandler(context=context)] if context is not None else []
        self._direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), *handlers)
        self._proxied = urllib.request.build_opener(*handlers)

    def fetch(self, url: str) -> str:
        opener = self._direct if urllib.parse.urlsplit(url).hostname in _LOOPBACK_HOSTS else self._proxied
        request = urllib.request.Request(url, headers={"Accept": "text/plain; version=0.0.4"})
        with opener.open(request, timeout=self.timeout) as response:
            return response.read().decode(response.headers.get_content_charset() or "utf-8", "replace")


class MemberScrape:
    """The members' side of a run's timeline: events and the durations' samples, appended as each second is read."""

    def __init__(self, members: Sequence[tuple[str, str]], fetcher: PageFetcher, on_event: Callable[[Event], None]):
        self.members = [(member_name(endpoint), url) for endpoint, url in members]
        self.fetcher = fetcher
        self.on_event = on_event
        self.samples: list[Sample] = []
        self.scrapes = 0
        self._last: dict[str, Reading] = {}
        self._greenlet: gevent.Greenlet | None = None

    def _read(self, member: str, url: str) -> None:
        started = time.time()
        try:
            reading = read_page(self.fetcher.fetch(url), started)
        except Exception as error:  # whatever the member sent back, an event and the run goes on
            last = self._last.get(member)
            why = describe_error(error, self.fetcher.timeout)
            since = f"; last answer at {clock(last.at)}" if last is not None else ""
            self.on_event(
                Event(
                    time.time(),
                    "member-unanswering",
                    member,
                    f"/metrics: {why} (asked at {clock(started)}{since})",
                    since=started,
                    size=time.time() - started,
                )
            )
            return
        before = self._last.get(member)
        self._last[member] = reading
        if before is None:
            return
        events, samples = between(member, before, reading)
        self.samples.extend(samples)
        for event in events:
            self.on_event(event)

    def scrape(self) -> None:
        """Every member once, at the same time."""
        jobs = [gevent.spawn(self._read, member, url) for member, url in self.members]
        gevent.joinall(jobs)
        self.scrapes += 1

    def _run(self) -> None:
        started = time.monotonic()
        periods = 0
        while True:
            try:
                self.scrape()
            except Exception as error:  # a failing scrape never stops a run
                logger.warning("tail: scrape failed: %s", error)
            # a fixed schedule; seconds missed while one was slow are skipped, not made up
            periods = max(periods + 1, int((time.monotonic() - started) / PERIOD_S) + 1)
            gevent.sleep(max(0.0, started + periods * PERIOD_S - time.monotonic()))

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=TIMEOUT_S + 1.0)
            self._greenlet = None


def start_scrape(settings, on_event: Callable[[Event], None]) -> MemberScrape | None:
    """A started scrape of the run's members, or None (none given, more than ``MAX_MEMBERS``, a TLS file unreadable)."""
    if not settings.endpoints:
        return None
    members = member_urls(settings)
    if len(members) > MAX_MEMBERS:
        logger.info(
            "tail: %d members: their /metrics are read each second up to %d only; the client's side goes on",
            len(members),
            MAX_MEMBERS,
        )
        return None
    try:
        context = ssl_context(settings) if any(url.startswith("https:") for _, url in members) else None
    except OSError as error:
        logger.warning("tail: the members' /metrics are not read: %s", error)
        return None
    scrape = MemberScrape(members, PageFetcher(TIMEOUT_S, context), on_event)
    scrape.start()
    return scrape
