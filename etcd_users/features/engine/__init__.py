"""The ready workloads on the transport's loop thread: each user's request loop a coroutine there, its results
applied to Locust's statistics in batches (``--etcd-engine loop``, the default).

``choice`` says which way each User class takes; ``user_loop`` keeps a user's greenlet and its coroutine together;
``repeat`` runs a ready workload's operation (``etcd_users.workload_model.workloads``, defined once for either
engine), ``client`` makes its calls; ``results`` carries the results to Locust's ``request`` listeners
(``locust_adapter``: Locust's own statistics, logged in batches).
"""

from etcd_users.core.features import Feature

FEATURE = Feature(
    "engine",
    hooks="hooks:EngineChoice",
    docs="performance.md",
    public=("choice", "client", "results", "user_loop"),
)
