"""Exact latencies: every request in HDR histograms (microseconds, 3 significant digits), merged across workers.

Locust rounds response times to whole milliseconds and reports integer percentiles, too coarse for etcd's
0.2-15 ms. Each request of Locust's ``request`` event is recorded a second time, per (type, name, series):
``service``, the response time the user measured, and ``intended``, ``context["intended_response_time"]``, the
latency from the intended send time of rate-driven users.

- ``store``: the histograms themselves, per wall-clock second and over the run, and the workers' report format (pure);
- ``writer``: ``PREFIX_latency.csv``, ``PREFIX_latency_history.csv`` and ``PREFIX_latency.hlog`` (columns in
  ``etcd_users.files``);
- ``client_cpu``: each Locust process's own CPU once a second, merged on the master: ``PREFIX_client_cpu.csv``, to
  tell a saturated load generator from a saturated etcd;
- ``recorder``: what Locust's events ask of them on a master, a worker or a single process (wired by
  ``etcd_users.core.plugin``);
- ``windows``: the merged histograms of a load shape's levels while they run, for their live verdicts.

The HDR maths (percentiles, mean, merging) is ``etcd_users.hdr``, shared with the analysis.
"""
