"""The tool's locustfile, inside the package so that an installed tool runs without a clone (``locust-etcd``).

    locust-etcd --headless -u 64 -r 64 -t 30s --csv out/run EtcdPutUser

The same as ``locust -f locustfile.py …`` in a clone, whose locustfile.py imports these classes from here: the ready
workloads and every feature's own (``users`` of its ``FEATURE``).
"""

from etcd_users.core.features import feature_users
from etcd_users.users import (  # noqa: F401  (Locust collects the User classes from this module)
    EtcdDeleteUser,
    EtcdKubernetesNodeUser,
    EtcdKubernetesUser,
    EtcdLeaseUser,
    EtcdMixedUser,
    EtcdPutUser,
    EtcdRangeUser,
    EtcdTxnMixedUser,
    EtcdTxnPutUser,
    EtcdWatcherUser,
    EtcdWatchUser,
    EtcdYcsbUser,
    LinearizableRangeUser,
    SerializableRangeUser,
)

globals().update(feature_users())  # a feature's workloads, from its own folder

__all__ = sorted(name for name, value in globals().items() if isinstance(value, type) and name != "feature_users")
