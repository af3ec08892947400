"""The ``--etcd-sla`` gates: their options and grammar (``options``), each kind judged on its own figures (pure),
and their hooks that judge them at a run's end and report them.

- ``sla``: the gates on the run's exact latencies, error share and throughput, and the result every kind gives;
- ``member_gates`` (``member:``), ``stale_gates`` (``stale:``), ``disruption_gates`` (``disrupt:``);
- ``level_verdicts``: a load shape's level judged on its own window, with the keep-up rule;
- ``hooks`` and ``verdicts``: judged at quitting, written (``junit``, ``step_summary``) and printed; ``state``: the
  results on the run's context; ``worker_watch``: the workers lost.
"""

from etcd_users.core.features import Feature
from etcd_users.features.gates.options import GateSettings

FEATURE = Feature(
    "gates",
    GateSettings,
    hooks="hooks:GatesRun",
    docs="pipelines.md",
)
