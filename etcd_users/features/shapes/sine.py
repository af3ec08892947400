"""SineWaveShape: the sine-wave rate with random jitter of a published etcd load model.

QPS = 50 + 30 * sin(2 pi t / 300) plus jitter drawn uniformly from [-8, 12] by ``random.Random(seed)``,
re-evaluated every 5 s, for ``--shape-sine-period`` x ``--shape-sine-cycles`` seconds, never below 1 QPS.
QPS becomes users through ``--etcd-user-rate``; a rate of 1 gives 1-QPS resolution::

    locust -f locustfile.py,shapes/sine.py --headless --etcd-user-rate 1 --shape-time-scale 0.2
"""

from etcd_users.features.shapes.base import PlannedShape
from etcd_users.features.shapes.options import ShapeSettings
from etcd_users.features.shapes.plan import Level, sine_plan


class SineWaveShape(PlannedShape):
    """A jittered sine wave of QPS, one level per re-evaluation."""

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        return sine_plan(settings, type(self).__name__)
