"""The watch workloads (``users``): a key watched and put by its own user, and prefix watchers that fan out, some of
them slow; what a process's watchers saw is shared (``etcd_users.run_state.watchers``)."""

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
