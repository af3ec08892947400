"""The watcher-only workload: prefix watchers that fan out, some of them slow, and what they saw."""

from etcd_users.core.features import Feature
from etcd_users.features.watchers.options import WatchSettings

FEATURE = Feature(
    "watchers",
    WatchSettings,
    hooks="run:WatchersRun",
    docs="workloads.md",
    users=("users:EtcdWatchUser", "users:EtcdWatcherUser"),
    public=("users",),
)
