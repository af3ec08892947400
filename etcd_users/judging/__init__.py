"""What a run is judged by, shared by the features that judge or show it (the gates, a load shape's levels, the
disruptions, the summary, the web UI, the exporter); pure unless said, and knows no feature.

- ``sla_specs``: the ``--etcd-sla`` grammar (``Gate``, ``parse_gates``) and a report's path;
- ``sla``: the gates on the run's exact latencies, error share and throughput, and the ``Result`` every kind gives;
  ``member_gates`` (``member:``), ``disruption_gates`` (``disrupt:``);
- ``levels``: a load shape's ``Level``; ``level_verdicts``: a level judged on its own window, with the keep-up rule;
  ``judged``: ``JudgedShape``, the hooks the tool calls on a load shape (Locust's ``Environment``);
- ``junit``: the JUnit report for CI;
- ``disruption_cost`` and ``disruption_span``: what a disruption window cost the requests.
"""
