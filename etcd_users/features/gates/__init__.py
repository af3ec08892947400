"""The ``--etcd-sla`` gates judged, each kind on its own figures; pure.

- ``sla``: the gates on the run's exact latencies, error share and throughput, and the result every kind gives;
- ``member_gates`` (``member:``), ``stale_gates`` (``stale:``), ``disruption_gates`` (``disrupt:``);
- ``level_verdicts``: a load shape's level judged on its own window, with the keep-up rule.

Their options and grammar are ``etcd_users.features.gates.options``'; ``etcd_users.features.gates.verdicts`` and
``gates_run``
judge them at a run's end and report them.
"""

from etcd_users.core.features import Feature
from etcd_users.features.gates.options import GateSettings

FEATURE = Feature("gates", GateSettings, hooks="hooks:GatesRun", docs="pipelines.md")
