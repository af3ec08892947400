"""A process's session: its settings, key space, bridge and connection pool, opened by its first user.

Each process that runs users opens its own on first use, after Locust has forked (``--processes``), and keeps it on
its run's context (``etcd_users.core.run_context``); a new run with other options (the web UI's form, the master's)
opens a new one.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)
from locust.exception import StopUser

import logging
from collections.abc import Callable
from typing import TypeVar

import gevent.lock

from etcd_users import key_space_fill
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import EndpointPool
from etcd_users.workload_model.keys import KeySpace

logger = logging.getLogger(__name__)

T = TypeVar("T")


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
        process before the run (``etcd_users.key_space_fill``), else here, once per process (a worker
        finds it written; a class without ``reads_key_space`` writes it on its first call). Stops the user when the fill
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


class ProcessSession:
    """The session slot of the run's context: the process's session for the environment's current options, opened by
    its first user, dropped when a new run brings other options (the web UI's form), closed at quit; and what lives
    and closes with it (the engine's loop results)."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._lock = gevent.lock.Semaphore()
        self._error = ""
        self._companions: dict[type, object] = {}

    def session(self, environment) -> Session:
        """The session, opened on first use; a process that cannot open it stops the user with one line."""
        if self._session is None:
            with self._lock:
                if self._session is None:
                    try:
                        self._session = Session(settings_from_options(environment.parsed_options))
                    except (SettingsError, EndpointError) as error:
                        # a worker's users cannot start (the master checked the endpoints, but this process may not
                        # reach them): one line for the process, not a traceback per user
                        if str(error) != self._error:
                            logger.error("locust-etcd: error: %s", error)
                            self._error = str(error)
                        raise StopUser() from None
        return self._session

    def users_pool(self) -> EndpointPool | None:
        """The pool of this process's users once they opened their session (never opens one): where their requests go
        now, and the members it left out. None on a master, or before any user."""
        session = self._session
        return session.pool if session is not None else None

    def companion(self, kind: type[T], make: Callable[[], T]) -> T:
        """The ``kind`` that lives and closes with the session, made by ``make`` on first use."""
        found = self._companions.get(kind)
        if found is None:
            found = self._companions[kind] = make()
        return found  # type: ignore[return-value]

    def companion_if_any(self, kind: type[T]) -> T | None:
        return self._companions.get(kind)  # type: ignore[return-value]

    def drop_if_changed(self, settings: EtcdSettings) -> None:
        """A new run may come with new options: the next user reconnects with them."""
        session = self._session
        if session is not None and session.settings != settings:
            self._session = None
            self._close_companions()
            session.close()

    def close(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        try:
            self._close_companions()
            session.close()
        except Exception as error:  # closing is best effort: the run is over
            logger.debug("closing etcd connections: %s", error)

    def _close_companions(self) -> None:
        companions, self._companions = self._companions, {}
        for companion in companions.values():
            companion.close()
