"""The master's (or single process's) watch over the members during one run: the db against its quota, the members'
/metrics, the compaction and the first breach's capture. Made at test start, stopped at test stop; the process's
``RunContext`` (``etcd_users.core.run_context``) holds the current one."""

import logging
from dataclasses import dataclass

from etcd_users.features.monitoring import breach, space
from etcd_users.members import server_metrics
from etcd_users.settings import EtcdSettings
from etcd_users.transport import compaction

logger = logging.getLogger("etcd_users.monitoring.during_run")  # the name users' log filters know


@dataclass
class RunMonitoring:
    settings: EtcdSettings
    space_watch: space.SpaceWatch  # the db against its quota and etcd's alarms
    poller: server_metrics.MetricsPoller | None  # --etcd-metrics-interval
    compactor: compaction.Compactor | None  # --etcd-compact-interval
    breached: bool = False  # the run has had its breach (captured or not): later ones change nothing

    @classmethod
    def start(
        cls, environment, settings: EtcdSettings, local_compaction: str | None = None, local_members=None
    ) -> "RunMonitoring":
        """``local_compaction``: the local etcd's own compaction, which the space warning counts on;
        ``local_members``: its members (client URL, /metrics URL) as they are now, for a member added during the run."""
        watch = space.SpaceWatch(settings, environment, local_compaction)
        poller = server_metrics.start_polling(environment, settings, watch, local_members)
        return cls(settings, watch, poller, compaction.start_compacting(settings))

    def capture_breach(self, why: str, prefix: str | None, busy: bool) -> breach.Capture | None:
        """The members at the run's first breach (``--etcd-profile-on-breach``, with ``--csv``), in the background;
        None for a later breach, with no capture asked for, or while ``busy`` with a previous run's."""
        if self.breached:
            return None
        self.breached = True
        if self.settings.monitoring.profile_on_breach <= 0 or busy or not prefix:
            return None  # no --csv: said once when the run started
        try:
            return breach.start_capture(prefix, self.settings, why)
        except Exception as error:  # a capture never stops a run
            logger.warning("breach capture: not started: %s", server_metrics.one_line(error))
            return None

    def stop(self) -> None:
        """Stop polling (with a last row per member: the state at the end) and compacting; a second call does
        nothing."""
        if self.poller is not None:
            self.poller.stop()
            self.poller = None
        if self.compactor is not None:
            self.compactor.stop()
            self.compactor = None
