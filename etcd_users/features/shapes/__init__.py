"""Locust load shapes for etcd, one profile per module; load one by listing its file after the locustfile.

- ``shapes/step_spike.py``: ``StepSpikeShape``, baseline, QPS steps to a maximum, then a spike (a published etcd
  load model).
- ``shapes/ladder.py``: ``ConcurrencyLadderShape``, closed-loop users 1, 200, 2000, ... (a published field report of
  a 3-node TLS etcd).
- ``shapes/sine.py``: ``SineWaveShape``, a jittered sine wave of QPS (a published etcd load model).
- ``shapes/capacity.py``: ``CapacitySearchShape``, probes of doubling then bisected QPS judged by ``--etcd-sla``: the
  capacity under the gates.

Shared, abstract: ``options`` (the ``--shape-*`` options), ``plan`` (levels, pure logic), ``timeline`` (each level
with what happened to it), ``judging`` (each level's live verdict), ``record`` (``PREFIX_shape.json``) and ``base``
(``PlannedShape``, which ticks and delegates to them); ``JudgedShape``, what the tool calls on one, and a shape's
``Level`` are shared (``etcd_users.judging``).
Example: ``locust -f locustfile.py,shapes/step_spike.py --etcd-user-rate 10``.
"""

from etcd_users.core.features import Feature
from etcd_users.features.shapes.options import ShapeSettings

FEATURE = Feature(
    "load shapes",
    ShapeSettings,
    hooks="hooks:ShapeHooks",
    docs="shapes.md",
    etcd_only=False,
    public=("step_spike", "ladder", "sine", "capacity"),
)
