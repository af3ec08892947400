"""What one run of the master (or single process) has going: made at test start, stopped at test stop."""

from dataclasses import dataclass

from etcd_users import compaction
from etcd_users.reporting import server_metrics, space
from etcd_users.settings import EtcdSettings


@dataclass
class RunState:
    settings: EtcdSettings
    space_watch: space.SpaceWatch  # the db against its quota and etcd's alarms
    poller: server_metrics.MetricsPoller | None  # --etcd-metrics-interval
    compactor: compaction.Compactor | None  # --etcd-compact-interval
    breached: bool = False  # the run has had its breach (captured or not): later ones change nothing

    @classmethod
    def start(cls, environment, settings: EtcdSettings) -> "RunState":
        watch = space.SpaceWatch(settings, environment)
        poller = server_metrics.start_polling(environment, settings, watch)
        return cls(settings, watch, poller, compaction.start_compacting(settings))

    def stop(self) -> None:
        """Stop polling (with a last row per member: the state at the end) and compacting; a second call does
        nothing."""
        if self.poller is not None:
            self.poller.stop()
            self.poller = None
        if self.compactor is not None:
            self.compactor.stop()
            self.compactor = None
