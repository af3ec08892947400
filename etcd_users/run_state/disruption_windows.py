"""The disruptions' slot on the run's context: their windows so far, with whether their run is over (the web UI);
final, each with its cost, stopping a run still going (the gates at quitting)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _no_windows() -> tuple[list[dict], bool]:
    return [], False


@dataclass
class DisruptionWindows:
    so_far: Callable[[], tuple[list[dict], bool]] = _no_windows
    final: Callable[[], list[dict]] = list
