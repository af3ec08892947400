"""How the tool talks to etcd: gRPC on its own event loop, apart from the users' API
(``etcd_users.user_base.client``).

- ``native``: grpc imported with native threads, locks and sockets under gevent's monkey patching;
- ``bridge``: the loop thread that makes every call and times it, and the hand-off to Locust's greenlets;
- ``pool``: the connections of a process and which member each request goes to (leader or rotation);
- ``streams``: the lease keep-alive and watch streams held open on the loop;
- ``watch_counts``: what the watch streams delivered, counted per guarantee of etcd's watch (pure);
- ``errors``: etcd's error labels, and which of them mean a lost leader or member;
- ``compaction``: ``--etcd-compact-interval``'s compactions of etcd's history on the master, which kube-apiserver's
  traffic reuses (its log lines keep the logger ``etcd_users.compaction``).

Nothing here is imported by the package itself: ``native`` must run before anything imports grpc.
"""
