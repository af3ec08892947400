"""``JudgedShape``: the hooks the tool calls on a load shape, and what it gives one (``shapes.base.PlannedShape``).

The plugin and the reports find the shape with ``judged_shape(environment)`` instead of probing Locust's shape for
attributes; the shape reaches the tool only through what the tool gives it at init (``recorder``, ``on_breach``),
never by looking the plugin up. Importing this module loads no shape, so it registers no ``--shape-*`` option.
"""

from __future__ import annotations

from locust.env import Environment

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from etcd_users.core.run_context import run_context

if TYPE_CHECKING:
    from etcd_users.core.exit_code import ExitVerdict
    from etcd_users.judging.levels import Level
    from etcd_users.latency.recorder import LatencyRecorder


@runtime_checkable
class JudgedShape(Protocol):
    """A load shape that plans levels, records them to ``PREFIX_shape.json`` and judges each by ``--etcd-sla``."""

    judges_whole_run: bool
    """False: the run's ``--etcd-sla`` gates are judged per level only, not also over the whole run at its end (the
    gates' end-of-run verdict and JUnit report skip them)."""

    recorder: LatencyRecorder | None
    """Given by the tool at init: the exact latencies each level is judged on. None (the default): no level is
    judged live."""

    on_breach: Callable[[str], None]
    """Given by the tool at init: called once per run with the verdict line of the run's first failing level (the
    members' monitoring's breach capture). Defaults to doing nothing."""

    member_rows: Callable[[], list | None]
    """Given by the tool at init: the members' polled rows of the current run (``PREFIX_etcd_metrics.csv``'s, kept
    in memory), None without polling; each level's ``member:`` gates are judged on those inside it."""

    @property
    def current_level(self) -> Level | None:
        """The level running now (the Prometheus exporter's ``shape_planned_qps`` and ``shape_level_info``); None
        before the first tick of a run and after its end."""
        ...

    def options_error(self, parsed_options) -> str | None:
        """What is wrong with the options for this shape, in one line; None when it can run. Starts nothing."""
        ...

    def judge_remaining_levels(self) -> None:
        """The run ends (at Locust's ``quitting``, once a master has its workers' last reports): end the running
        level and judge every level still waiting for its verdict, on the final figures."""
        ...

    def exit_verdict(self) -> ExitVerdict | None:
        """After ``judge_remaining_levels``: the shape's own verdict on the run when it fails it (a capacity search
        that found no capacity); None otherwise. Live verdicts of levels are not the run's."""
        ...

    def shape_record(self) -> dict:
        """What ``PREFIX_shape.json`` holds now (``shapes.record``): the web UI's SLA tab lists its verdicts, the
        JUnit report has a case per judged level."""
        ...


def judged_shape(environment: Environment) -> JudgedShape | None:
    """The run's load shape when it is one of the tool's; None without a shape or with another kind."""
    shape = environment.shape_class
    return shape if isinstance(shape, JudgedShape) else None


def judged_shapes(environment: Environment) -> list[JudgedShape]:
    """Every shape of the tool a run may use: the selected one and those the web UI's class picker offers."""
    shapes: list[JudgedShape] = []
    for shape in (environment.shape_class, *(environment.available_shape_classes or {}).values()):
        if isinstance(shape, JudgedShape) and not any(shape is known for known in shapes):
            shapes.append(shape)
    return shapes


def check_on_init(environment: Environment) -> None:
    """At Locust's ``init``: refuse bad ``--shape-*`` options in one line (exit 2) instead of at the first tick."""
    shape = judged_shape(environment)
    if shape is None or run_context(environment).role.is_worker:
        return  # workers get the master's options later and never tick
    options = environment.parsed_options
    if options is not None and options.class_picker:
        return  # the shape is picked in the web UI; tick() validates it then
    error = shape.options_error(options)
    if error:
        sys.stderr.write(f"locust-etcd: error: {error}\n")
        sys.exit(2)
