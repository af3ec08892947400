"""The members as a run finds them, shared by the features that read them (the monitoring, the gates, a shape's
levels, the disruptions, the summary, the web UI, the tail); knows no feature.

- ``preflight``: each member's version, db size against quota and WAL fsync P99 before the load starts;
- ``server_metrics``: every member's /metrics polled during the run into ``PREFIX_etcd_metrics.csv``; ``buckets``:
  etcd's Prometheus histograms; ``member_figures``: the members' figures over a span, worst member first (pure);
- ``member_lookups`` and ``member_list``: each member's /metrics looked up on its own, etcd's MemberList each second
  (the web UI's);
- ``lost_workers``: workers lost during a run, in words and in the summary's terms;
- ``breach_files``: where a breach capture writes; ``seen``: ``MembersSeen``, the members found, on the run's context.
"""
