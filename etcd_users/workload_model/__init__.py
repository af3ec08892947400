"""The workload model: what the ready workloads ask of etcd, apart from how a user sends it.

- ``keys``: the key space under the prefix, keys of a fixed size, the value written;
- ``distributions``: which key each request takes (uniform, sequential, zipfian, latest, hotspot), pure;
- ``arrivals``: when a rate-driven user's requests are due (``--etcd-arrival``), pure;
- ``ycsb``: YCSB's core workloads A–F, their proportions and distributions, pure;
- ``requests``: the requests both engines build (the range read and its names, txn-put's and txn-mixed's
  transactions);
- ``preparation``: what a run writes before its measured window, pure (``etcd_users.key_space_fill`` writes the
  reads' key space, over the transport).

Nothing is imported here: ``etcd_users.settings`` reads the pure modules without Locust, gevent or grpc.
"""
