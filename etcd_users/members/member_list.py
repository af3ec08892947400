"""The members as etcd lists them (MemberList, learners included), read every ``membership.POLL_S`` through the
process's own connections (``transport.probe``), for as long as someone reads them (``IDLE_S``): the web UI's table
follows the membership as the users' pools do (``transport.membership``).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging
import time

import gevent

from etcd_users.settings import EtcdSettings
from etcd_users.transport import membership
from etcd_users.transport.probe import Probe

logger = logging.getLogger("etcd_users.monitoring.member_list")  # the name users' log filters know

IDLE_S = 10.0  # nobody has read the list for this long: it is read again at the next read


class MemberListWatch:
    """The latest MemberList of the cluster of ``settings``; None until one is read."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self.members: list | None = None
        self._probe = Probe(settings)
        self._greenlet: gevent.Greenlet | None = None
        self._read_at = time.monotonic()
        self._closed = False

    def latest(self) -> list | None:
        """The members as last listed (read again in the background, every ``membership.POLL_S``)."""
        self._read_at = time.monotonic()
        if not self._closed and (self._greenlet is None or self._greenlet.dead):
            self._greenlet = gevent.spawn(self._follow)
        return self.members

    def _follow(self) -> None:
        while not self._closed and time.monotonic() - self._read_at < IDLE_S:
            started = time.monotonic()
            try:
                members = self._probe.run(lambda pool: pool.member_list())
            except Exception as error:  # a read in the background (no member answers now): the last list stays
                logger.debug("etcd members: not listed: %s", error)
                members = None
            if members is not None:
                self.members = members
            gevent.sleep(max(0.0, started + membership.POLL_S - time.monotonic()))

    def close(self) -> None:
        """Stop reading and close the connections (before the process's bridge closes)."""
        self._closed = True
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=1.0)
        self._probe.close()
