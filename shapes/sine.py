"""SineWaveShape: the sine-wave rate with random jitter of seed 004.

QPS = 50 + 30 * sin(2 pi t / 300) plus jitter drawn uniformly from [-8, 12] by ``random.Random(seed)``,
re-evaluated every 5 s, for ``--shape-sine-period`` x ``--shape-sine-cycles`` seconds, never below 1 QPS.
QPS becomes users through ``--etcd-user-rate``; a rate of 1 gives 1-QPS resolution::

    locust -f locustfile.py,shapes/sine.py --headless --etcd-user-rate 1 --shape-time-scale 0.2
"""

import sys
from pathlib import Path

try:
    from shapes.base import PlannedShape
except ModuleNotFoundError as error:  # loaded by path from outside the repo: make the repo root importable
    if error.name != "shapes":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from shapes.base import PlannedShape

from shapes.options import ShapeSettings
from shapes.plan import Level, sine_plan


class SineWaveShape(PlannedShape):
    """A jittered sine wave of QPS, one level per re-evaluation."""

    def build_plan(self, settings: ShapeSettings) -> list[Level]:
        return sine_plan(settings, type(self).__name__)
