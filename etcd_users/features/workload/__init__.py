"""The workload and its keys: the options every ready workload reads (``etcd_users.settings.workload``), the lease
workload (``users``) and the puts per key counted from the keys' versions at the run's start and stop (``key_skew``,
``PREFIX_skew.json``). The users' client is shared: ``etcd_users.user_base``; the ready workloads' definitions too:
``etcd_users.workload_model.workloads``."""

from etcd_users.core.features import Feature
from etcd_users.settings import WorkloadSettings

FEATURE = Feature(
    "workload and keys",
    WorkloadSettings,
    hooks="key_skew:KeySkew",
    docs="workloads.md",
    users=("users:EtcdLeaseUser",),
    public=("users",),
)
