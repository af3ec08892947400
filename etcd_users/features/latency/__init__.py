"""Exact latency of every request (HDR histograms, merged across workers), the client's CPU, and what a run
leaves of them at its end: ``hooks`` (the recorder on Locust's events), ``end_of_run`` (the exact table and the files
written), ``final_stats`` (Locust's CSVs completed). The store itself is shared: ``etcd_users.latency``."""

from etcd_users.core.features import Feature

FEATURE = Feature("exact latencies", hooks="hooks:LatencyHooks", docs="analysis.md", etcd_only=False)
