"""``PREFIX_shape.json``: the plan and the timeline of a run, for the analysis (``etcd_users.analysis.load`` reads it).

It holds the shape's name, when the run started (``started_at``) and its measured window began (``warmup_end``),
when it ended (``ended_at``, None while it runs), the per-user rate, the run's ``--etcd-sla`` text (``sla``), why it
ended before its plan did (``stopped``), and per level its plan with what happened to it (``timeline.LevelRecord``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from etcd_users.features.shapes.timeline import Timeline
from etcd_users.files import SUFFIXES


def shape_record(shape: str, timeline: Timeline, user_rate: float | None, sla: str | None, stopped: str | None) -> dict:
    return {
        "shape": shape,
        "started_at": timeline.started_at,
        "warmup_end": timeline.warmup_end(),
        "ended_at": timeline.ended_at,
        "user_rate": user_rate,
        "sla": sla,
        "stopped": stopped,
        "levels": [record.to_dict() for record in timeline.levels],
    }


def record_path(prefix: str) -> Path:
    return Path(prefix + SUFFIXES["shape"])


def write_json(path: Path, document: dict) -> None:
    """Replace ``path`` with ``document`` at once: readers never see a half-written file. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(partial, path)
