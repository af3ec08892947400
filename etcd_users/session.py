"""A process's session: its settings, key space, bridge and connection pool, opened by its first user.

Each process that runs users opens its own on first use, after Locust has forked (``--processes``), and keeps it on
its run's context (``etcd_users.core.run_context``); a new run with other options (the web UI's form, the master's) opens
a new one.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)
from locust.exception import StopUser

import logging

import gevent.lock

from etcd_users.features.key_space import fill as key_space_fill
from etcd_users.keys import KeySpace
from etcd_users.settings import EtcdSettings
from etcd_users.transport import bridge
from etcd_users.transport.pool import EndpointPool

logger = logging.getLogger(__name__)


class Session:
    """Settings, transport and connections of one process for one run."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings)
        distribution = settings.distribution
        if distribution.kind not in ("uniform", "sequential"):
            # what the run's skew should be, to compare with the members' keys afterwards
            logger.info(
                "keys drawn %s: %.1f%% of the requests to the hottest 1%% of the %d keys, in theory",
                distribution,
                100.0 * distribution.hottest_share(self.keys.size),
                self.keys.size,
            )
        self.bridge = bridge.bridge()
        self.pool = EndpointPool(settings)
        self.bridge.run(self.pool.open)
        self._populated = False
        self._populate_lock = gevent.lock.Semaphore()

    def ensure_key_space(self) -> None:
        """The key space is written before reads measure it, never reported as requests: by the master or the single
        process before the run (``etcd_users.features.key_space.fill``), else here, once per process (a worker finds it
        written; a class without ``reads_key_space`` writes it on its first call). Stops the user when the fill
        failed: its reads would miss."""
        if self._populated:
            return
        with self._populate_lock:
            if not self._populated:
                filled = key_space_fill.prepared(self.settings) or key_space_fill.fill_key_space(
                    self.settings, inside_run=True
                )
                if filled.failed:
                    raise StopUser()
                self._populated = True

    def close(self) -> None:
        self.bridge.run(self.pool.close)
