"""The throwaway local etcd the tool starts itself: 1 to 5 members on 127.0.0.1, for the embedded default and tests.

``python -m etcd_users.local`` runs one until Ctrl-C (``__main__``); ``cluster_from_settings`` builds the one a run's
settings ask for. ``LocalCluster`` (``cluster``) composes the rest: the etcd binary, found or chosen (``binary``), free
and kept ports (``ports``), each member's quota and compaction (``space``), TLS (``tls``), a member's addresses and
flags (``member``), its process (``supervision``), what its HTTP listener (``probes``) and its log (``logs``) say,
authentication (``auth``), and the peer proxy's process that delays or cuts the members' peer traffic (``peer_proxy``,
driven through ``peer_links``).
"""

from etcd_users.local.binary import (
    MISSING_BINARY_MESSAGE,
    EtcdBinary,
    choose_etcd_binary,
    find_etcd_binary,
    found_binaries,
)
from etcd_users.local.cluster import LocalCluster, cluster_from_settings
from etcd_users.local.errors import ClusterError
from etcd_users.local.member import ELECTION_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS
from etcd_users.local.ports import PORTS_FILE
from etcd_users.local.space import AUTO_COMPACTION_RETENTION, QUOTA_BYTES, QUOTA_SHARE_OF_FREE_DISK, fitting_quota
from etcd_users.local.supervision import STOP_GRACE_SECONDS
from etcd_users.local.tls import ClusterTLS

__all__ = [
    "AUTO_COMPACTION_RETENTION",
    "ELECTION_TIMEOUT_MS",
    "HEARTBEAT_INTERVAL_MS",
    "MISSING_BINARY_MESSAGE",
    "PORTS_FILE",
    "QUOTA_BYTES",
    "QUOTA_SHARE_OF_FREE_DISK",
    "STOP_GRACE_SECONDS",
    "ClusterError",
    "ClusterTLS",
    "EtcdBinary",
    "LocalCluster",
    "choose_etcd_binary",
    "cluster_from_settings",
    "find_etcd_binary",
    "found_binaries",
    "fitting_quota",
]
