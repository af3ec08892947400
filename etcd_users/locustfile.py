"""The tool's locustfile, inside the package so that an installed tool runs without a clone (``locust-etcd``).

    locust-etcd --headless -u 64 -r 64 -t 30s --csv out/run EtcdPutUser

The same as ``locust -f locustfile.py …`` in a clone, whose locustfile.py imports these classes from here.
"""

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
