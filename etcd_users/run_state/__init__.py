"""The slots features meet in on the run's context (``etcd_users.core.run_context``): the state one feature leaves and
others read, typed here so that neither imports the other. Pure.

- ``disruption_windows``: ``DisruptionWindows``, the disruptions' windows so far and final;
- ``gate_state``: ``GateState``, the gates' results and the workers lost;
- ``watchers``: ``ProcessWatchers`` (a process's watchers, written by either engine's client) and ``WatchTallies``;
  ``watch_tally``: what they saw; ``watch_latencies``: their events matched to this process's puts.
"""
