"""A load shape of your own on the tool's shape base: a short closed-loop ramp of 2, 4 then 8 users.

    locust -f examples/custom_shape.py --headless --csv out/ramp

``PlannedShape`` runs the levels ``build_plan`` returns, one after another, then stops the run; it logs each level
as it starts, writes ``out/ramp_shape.json`` (the plan, when each level started and when its users were all
running) for ``python -m analysis out/ramp``, and with ``--etcd-sla`` judges each level as it ends. ``--shape-*``
options reach ``build_plan`` as ``settings``: here ``--shape-time-scale`` stretches or shrinks the ramp.
"""

from etcd_users import EtcdPutUser  # noqa: F401  (the workload the shape drives; Locust takes it from this module)
from etcd_users.features.shapes.base import PlannedShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import Level


class ShortRampShape(PlannedShape):
    """Closed-loop users 2, 4, 8, each held 3 s (times ``--shape-time-scale``, at least 1 s: a tick is a second)."""

    steps = (2, 4, 8)
    hold_s = 3.0

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        hold = max(self.hold_s * settings.time_scale, 1.0)
        levels, previous = [], 0
        for number, users in enumerate(self.steps, start=1):
            start = (number - 1) * hold
            # qps None: a closed-loop level; the spawn rate reaches the level's users within its first second
            levels.append(Level(f"ramp {number}", start, start + hold, users, None, float(max(users - previous, 1))))
            previous = users
        return levels
