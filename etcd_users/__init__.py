"""Locust users for load-testing etcd over its v3 gRPC API.

``from etcd_users import EtcdUser`` loads the users, which install the ``--etcd-*`` options and the run's life cycle
(``etcd_users.core.plugin``) into Locust. The package itself imports only grpc, and that only under gevent's monkey
patching (``transport.native``), so ``python -m etcd_users.local``, the suite runner and the analysis can use its
pure parts without Locust.

Where to look: a request of the ready workloads is timed in ``features/engine/client.py`` (``LoopClient.unary``, its end
at grpc's done callback), one of a greenlet in ``transport/bridge.py`` (``Bridge._start_unary``, ``_on_unary_done``); an
endpoint is chosen in ``transport/pool.py`` (``EndpointPool.next_connection``, ``select``); a percentile is computed in
``hdr.py`` (``percentiles_us``); each Locust event is handled in ``core/plugin.py`` (``install``), which hands it to the
hooks of the feature packages ``core/features.py`` names (``features/NAME/``), in their order.
"""

import importlib
import os

from etcd_users.transport import native

# gRPC's C core logs a line of its own for each failed TLS handshake ("I1130 ... Handshake failed ..."); the
# tool reports the failure itself, in one line. Set before any module imports grpc; an explicit value wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
# gRPC's fork handlers run in every forked child: a local etcd member started again mid-run (a fork of a process whose
# gRPC threads are busy) died in them at once (SIGSEGV, a gRPC error line in its log). The tool's channels are made
# after Locust's --processes fork, so it needs none of them.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
native.import_grpc()

_EXPORTS = {
    "EtcdClient": "etcd_users.user_base.client",
    "KeyOutsidePrefixError": "etcd_users.user_base.client",
    "EtcdDeleteUser": "etcd_users.users",
    "EtcdKubernetesNodeUser": "etcd_users.users",
    "EtcdKubernetesUser": "etcd_users.users",
    "EtcdLeaseUser": "etcd_users.users",
    "EtcdMixedUser": "etcd_users.users",
    "EtcdPutUser": "etcd_users.users",
    "EtcdTxnMixedUser": "etcd_users.users",
    "EtcdTxnPutUser": "etcd_users.users",
    "EtcdWatchUser": "etcd_users.users",
    "EtcdWatcherUser": "etcd_users.users",
    "EtcdYcsbUser": "etcd_users.users",
    "EtcdRangeUser": "etcd_users.users",
    "EtcdUser": "etcd_users.users",
    "LinearizableRangeUser": "etcd_users.users",
    "SerializableRangeUser": "etcd_users.users",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'etcd_users' has no attribute {name!r}")
