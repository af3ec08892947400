"""The watch workloads: a user that watches its own key and puts it (``EtcdWatchUser``), and one that only watches
the prefix or a few keys, with fan-out and slow streams (``EtcdWatcherUser``)."""

from locust import task
from locust.user.users import LOCUST_STATE_RUNNING

from etcd_users.features.watchers.client import WatcherClient
from etcd_users.user_base.user import EtcdUser

# at the stop, how long the watchers may take to receive the events of the last puts before they are judged
WATCH_CATCH_UP_SECONDS = 10.0


class EtcdWatchUser(EtcdUser):
    """Watches one key of its own with ``--etcd-watch-streams`` × ``--etcd-watchers-per-stream`` watchers and puts
    it in a loop: ``put`` rows, and one ``watch`` row per event received, timed from the put's acknowledgement."""

    @task
    def put_and_watch(self) -> None:
        keys = self.etcd.keys
        key, put_and_watch = keys.next_key(), self.etcd.put_and_watch
        self.repeat(lambda: put_and_watch(key, keys.value))

    def on_stop(self) -> None:
        self.etcd.stop_streams(catch_up=WATCH_CATCH_UP_SECONDS)


class EtcdWatcherUser(EtcdUser):
    """Watches the prefix (or ``--etcd-watch-keys`` keys) with ``--etcd-watch-streams`` × ``--etcd-watchers-per-stream``
    watchers and writes nothing: the writers are any other workload, in this run or another. One ``watch/event``
    row per event of a put of this process, timed from the put's acknowledgement; the events, their lag in revisions
    and the watchers etcd cancelled in the ``watchers:`` line."""

    follows_user_rate = False

    @task
    def watch(self) -> None:
        self.watchers = WatcherClient(self.etcd)
        self.watchers.run(lambda: self._state == LOCUST_STATE_RUNNING)

    def on_stop(self) -> None:
        watchers = getattr(self, "watchers", None)
        if watchers is not None:
            watchers.stop()
