"""What a run reports, beside Locust's own, and the hooks that report it.

- ``end_of_run``: the exact latency table and the files written, printed after Locust's summary;
- ``final_stats``: Locust's ``PREFIX_stats.csv`` (and history, failures, exceptions) completed at the end;
- ``summary``: ``PREFIX_summary.json`` and perfdash's files;
- ``verdicts`` and ``gates_run``: the gates' hooks: judged at quitting (``etcd_users.gates``), written for CI,
  printed after the files;
- ``junit``: the gates and a shape's per-level verdicts as a JUnit XML report (``--etcd-junit``), for CI;
- ``step_summary``: the latency table, gates and verdicts in Markdown on a GitHub Actions job's summary page;
- ``webui``: the etcd tabs of Locust's web UI, and its start form; ``exporter``: the live Prometheus exporter;
- ``key_skew``: how skewed the writes were (``PREFIX_skew.json``);
- ``worker_watch``: workers that go silent mid-run; ``empty_run``: a run that measured no request;
  ``rate_shortfall``: an ``--etcd-user-rate`` the users did not hold.

The features' hooks (``etcd_users.features``: ``gates_run``, ``exporter``, ``webui``, ``key_skew``, ``summary``)
and ``etcd_users.plugin`` decide when each of them runs.
"""
