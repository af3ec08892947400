"""The ``--etcd-sla`` gates: their options (``options``; the grammar and the kinds another feature judges too are
shared, in ``etcd_users.judging``) and their hooks that judge them at a run's end and report them.

- ``stale_gates`` (``stale:``): judged on the audit's staleness (pure);
- ``hooks`` and ``verdicts``: judged at quitting, written (``etcd_users.judging.junit``, ``step_summary``) and
  printed, the results on the run's context (``etcd_users.run_state.gate_state``); ``worker_watch``: the workers lost.
"""

from etcd_users.core.features import Feature
from etcd_users.features.gates.options import GateSettings

FEATURE = Feature(
    "gates",
    GateSettings,
    hooks="hooks:GatesRun",
    docs="pipelines.md",
)
