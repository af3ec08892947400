"""Locust users for load-testing etcd over its v3 gRPC API.

Importing the package registers the ``--etcd-*`` options and the run's life-cycle hooks with Locust.
"""

from locust import events  # noqa: F401  (gevent's monkey patching must come first)

from etcd_users import options, session  # noqa: F401  (register their Locust listeners)
from etcd_users.client import EtcdClient
from etcd_users.users import EtcdPutUser, EtcdRangeUser, EtcdUser, LinearizableRangeUser, SerializableRangeUser

__all__ = [
    "EtcdClient",
    "EtcdPutUser",
    "EtcdRangeUser",
    "EtcdUser",
    "LinearizableRangeUser",
    "SerializableRangeUser",
]
