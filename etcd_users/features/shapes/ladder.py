"""ConcurrencyLadderShape: the concurrency ladder of a published field report of a 3-node
TLS etcd (etcd's ``benchmark put`` at 1 to 20,000 clients).

Closed-loop users 1, 200, 2000, 5000, 10000, 20000 (``--shape-ladder``), each rung held
``--shape-step-time`` seconds, then stop. Each user sends its next request when the last one returns, so
leave ``--etcd-user-rate`` at 0::

    locust -f locustfile.py,shapes/ladder.py --headless --shape-ladder 1,50,200 --shape-time-scale 0.1
"""

from etcd_users.features.shapes.base import PlannedShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import Level, ladder_plan


class ConcurrencyLadderShape(PlannedShape):
    """Closed-loop user counts held one after another."""

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        return ladder_plan(settings)

    def plan_warnings(self, settings: ShapeSettings, plan: list[Level]) -> list[str]:
        if settings.user_rate <= 0:
            return []
        return [
            f"shape: --etcd-user-rate {settings.user_rate:g} caps each user at {settings.user_rate:g} requests/s; "
            "the ladder measures closed-loop concurrency, so leave --etcd-user-rate at 0"
        ]
