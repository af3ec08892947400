"""StepSpikeShape: the step-plus-spike load model of a published etcd load model.

A 100 QPS baseline for 300 s, then +200 QPS every 120 s (300, 500, ..., 1900, then 2000: the last step is
capped at ``--shape-max-qps``), then a 3000 QPS spike for 5 s, then stop. QPS becomes users through
``--etcd-user-rate``::

    locust -f locustfile.py,shapes/step_spike.py --headless --etcd-user-rate 10 --shape-time-scale 0.05
"""

from etcd_users.features.shapes.base import PlannedShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import Level, step_spike_plan


class StepSpikeShape(PlannedShape):
    """Baseline, QPS steps up to the maximum, a short spike, stop."""

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        return step_spike_plan(settings, type(self).__name__)
