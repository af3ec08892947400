"""A process's session: its settings, key space, bridge and connection pool, opened by its first user.

Each process that runs users opens its own on first use, after Locust has forked (``--processes``); a new run with
other options (the web UI's form, the master's) opens a new one (``drop_if_changed``).
"""

from locust.exception import StopUser

import logging

import gevent.lock

from etcd_users import key_space_fill
from etcd_users.keys import KeySpace
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError
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
        process before the run (``etcd_users.key_space_fill``), else here, once per process (a worker finds it
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


_sessions: dict[int, Session] = {}
_last_session_error = [""]
_session_lock = gevent.lock.Semaphore()


def current(environment) -> Session:
    """This process's session for the environment's current options, opened on first use."""
    session = _sessions.get(id(environment))
    if session is None:
        with _session_lock:
            session = _sessions.get(id(environment))
            if session is None:
                try:
                    session = Session(settings_from_options(environment.parsed_options))
                except (SettingsError, EndpointError) as error:
                    # a worker's users cannot start (the master checked the endpoints, but this process may not
                    # reach them): one line for the process, not a traceback per user
                    if str(error) != _last_session_error[0]:
                        logger.error("locust-etcd: error: %s", error)
                        _last_session_error[0] = str(error)
                    raise StopUser() from None
                _sessions[id(environment)] = session
    return session


def drop_if_changed(environment, settings: EtcdSettings) -> None:
    """A new run may come with new options: the next user reconnects with them."""
    session = _sessions.get(id(environment))
    if session is not None and session.settings != settings:
        _sessions.pop(id(environment), None)
        session.close()


def close_sessions() -> None:
    while _sessions:
        _, session = _sessions.popitem()
        try:
            session.close()
        except Exception as error:  # closing is best effort: the run is over
            logger.debug("closing etcd connections: %s", error)
