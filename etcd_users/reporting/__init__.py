"""The run's reporting, beside Locust's own: what the members say and whether the run met its gates.

- ``preflight``: each member's version, db size against quota and WAL fsync P99 before the load starts;
- ``server_metrics``: every member's /metrics polled during the run into ``PREFIX_etcd_metrics.csv``;
- ``exposition``: the reader of Prometheus' text format those pages are in;
- ``sla``: the ``--etcd-sla`` gates judged on the exact latencies;
- ``webui``: the etcd tabs of Locust's web UI, and its start form;
- ``end_of_run``: the exact latency table and the files written, printed after Locust's summary;
- ``final_stats``: Locust's ``PREFIX_stats.csv`` (and history, failures, exceptions) completed at the end;
- ``junit``: the gates and a shape's per-level verdicts as a JUnit XML report (``--etcd-junit``), for CI;
- ``step_summary``: the latency table, gates and verdicts in Markdown on a GitHub Actions job's summary page;
- ``gates_run``: the gates' hooks: judged at quitting, written for CI, printed after the files.

The features' hooks (``etcd_users.features``: ``gates_run``, ``exporter``, ``webui``, ``key_skew``, ``summary``)
and ``etcd_users.plugin`` decide when each of them runs.
"""
